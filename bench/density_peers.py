"""density_peers: bench/density.py's workload on AgentOps, DBOS (threads) and LangGraph (async).

N runs of S + 1 steps; a step is one call to bench.model_server (a real HTTP server speaking
OpenAI chat completions that sleeps L s) through the real ``openai`` client, then the step's
durable record. The engines take turns in one window, each on its own database of the same
PostgreSQL server, each with a fresh model server: AgentOps (bench/density.py with BENCH_CAP=0
pointed at it: ONE worker host with default settings, i.e. 2 q2 processes), DBOS with threads
and LangGraph async, each ONE process (bench/_peer_agents.py says how each is set up). The
raw commit floor (one INSERT + COMMIT) is measured before every engine.

Every engine is measured the same way, from outside it: runs in flight = the model server's
peak of requests served at once; steps/s = model replies a second, overall and over the
middle half of the busy window, against the ideal N / L; step latency above L = the gap
between two replies of one run minus L (the model server's reply times); memory per in-flight
run = (RSS at the sample with the most requests in flight - RSS once set up) / those requests;
connections = the engine's PostgreSQL sessions, peak (AgentOps: its host's, from density.py).

Env: BENCH_RUNS ("200,500": one window per N, in turn), BENCH_DELAY_S (1.0), BENCH_STEPS
(20), BENCH_ROUNDS (1), BENCH_PEER_ENGINES ("agentops,dbos,langgraph,langgraph_per_run"; a
peer named with ``_tool``, e.g. dbos_tool, also records each tool call as a durable step of
its own, as AgentOps does), BENCH_PEER_POOL (20: langgraph_per_run's pool, as DBOS's
default), BENCH_DENSITY_PEERS_URL (base database URL; engines get _dbos, _lg, ... suffixes),
BENCH_AGENTOPS_DATABASE_URL, BENCH_AGENTOPS_PYTHON (the AgentOps venv's python:
./.venv/bin/python when there).
Needs the ``peers`` extra; prints a skipped line without it.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._common import (commit_floor, db_ensure, db_fresh, db_url_suffixed, emit, log,  # noqa: E402
                           maintenance_url, percentiles)
from bench.model_server import model_server_start, stats_get  # noqa: E402

RUNS = [int(n) for n in os.environ.get("BENCH_RUNS", "200,500").split(",")]
DELAY_S = float(os.environ.get("BENCH_DELAY_S", "1.0"))
STEPS = int(os.environ.get("BENCH_STEPS", "20"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "1"))
ENGINES = os.environ.get("BENCH_PEER_ENGINES", "agentops,dbos,langgraph,langgraph_per_run")
POOL = int(os.environ.get("BENCH_PEER_POOL", "20"))
BASE_URL = os.environ.get("BENCH_DENSITY_PEERS_URL",
                          "postgres://postgres@127.0.0.1:5432/agentops_bench_peers_density")
AGENTOPS_URL = os.environ.get("BENCH_AGENTOPS_DATABASE_URL",
                              "postgres://postgres@127.0.0.1:5432/agentops_engine_peers")
PEER_MODULES = ("dbos", "langgraph", "langgraph.checkpoint.postgres", "psycopg_pool")
SKIP_REASON = "pip install -e '.[peers]' (DBOS, LangGraph, AsyncPostgresSaver) to run the peers"
SHAPE = ("AgentOps runs ONE worker host with default settings: 2 q2 processes (plus the "
         "host's main process and q2 sentinel), each keeping up to 250 runs in flight; DBOS and "
         "LangGraph each run in ONE process")
SUFFIX = {"dbos": "_dbos", "langgraph": "_lg", "langgraph_per_run": "_lgrun",
          "dbos_tool": "_dbost", "langgraph_tool": "_lgt", "langgraph_per_run_tool": "_lgrunt"}


def missing_peers() -> list[str]:
    """Return the peer modules that cannot be imported by this interpreter."""
    out = []
    for name in PEER_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ModuleNotFoundError, ValueError):
            found = False
        if not found:
            out.append(name)
    return out


def replies_figures(replies: dict[str, list[float]], delay_s: float) -> dict[str, Any]:
    """Steps/s (overall, middle half of the busy window) and latency above L from reply times.

    The same definitions as density.py, read from the model server so every engine is
    measured alike: a step's latency above L is the gap between two replies of one run - L.
    """
    times = sorted(t for ts in replies.values() for t in ts)
    gaps = [(b - a - delay_s) * 1000 for ts in replies.values()
            for a, b in zip(sorted(ts), sorted(ts)[1:])]
    if len(times) < 2:
        return {"model_calls": len(times), "steps_per_s": None, "steps_per_s_mid": None,
                "above_l_ms": percentiles(gaps)}
    first, last = times[0], times[-1]
    q1, q3 = first + (last - first) / 4, first + 3 * (last - first) / 4
    middle = sum(1 for t in times if q1 <= t <= q3)
    return {"model_calls": len(times), "steps_per_s": round(len(times) / (last - first), 1),
            "steps_per_s_mid": round(middle / (q3 - q1), 1),
            "above_l_ms": {k: round(v, 1) for k, v in percentiles(gaps).items()}}




def _proc_figures(pid: int) -> tuple[float, float]:
    """Return (RSS MB, CPU seconds) of one process, all its threads; (0, 0) once gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    rss = next((int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("VmRSS:")),
               0)  # a zombie (exited, not yet waited for) has none
    return rss / 1024, (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


class _Sampler:
    """Sample the model server's requests in flight, and a process's RSS and CPU and its
    database's sessions (when given), four times a second until stopped."""

    def __init__(self, model_url: str, pid: int | None = None, db: str | None = None):
        self.model_url, self.pid, self.db = model_url, pid, db
        self.peak = {"in_flight": 0, "rss_at_peak_mb": 0.0, "rss_mb": 0.0, "sessions": 0,
                     "cpu_s": 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "_Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _loop(self) -> None:
        import psycopg

        with psycopg.connect(maintenance_url(BASE_URL)[0], autocommit=True) as conn:
            while not self._stop.wait(0.25):
                try:
                    self._sample(conn)
                except (OSError, ValueError, psycopg.Error) as exc:  # a slow /stats: next one
                    log(f"  sample skipped: {exc!r}")

    def _sample(self, conn: Any) -> None:
        current = stats_get(self.model_url)["current"]
        if self.pid is None:
            self.peak["in_flight"] = max(self.peak["in_flight"], current)
            return
        rss, cpu = _proc_figures(self.pid)
        if not rss:
            return
        if current > self.peak["in_flight"]:
            self.peak.update(in_flight=current, rss_at_peak_mb=rss)
        sessions = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s",
                                [self.db]).fetchone()[0]
        self.peak["sessions"] = max(self.peak["sessions"], sessions)
        self.peak["rss_mb"] = max(self.peak["rss_mb"], rss)
        if cpu:
            self.peak["cpu_s"] = cpu


def _peer_pass(engine: str, runs: int, model_url: str) -> dict[str, Any]:
    """Run ``runs`` runs on one peer engine in its own process; return its figures."""
    url = db_url_suffixed(BASE_URL, SUFFIX[engine])
    db_fresh(url)
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "_peer_agents.py"), engine,
                             str(runs), model_url, url, str(POOL)], cwd=ROOT, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{engine} did not come up (exit {proc.wait(30)})")
        time.sleep(1)
        idle_mb, cpu0 = _proc_figures(proc.pid)
        with _Sampler(model_url, proc.pid, maintenance_url(url)[1]) as sampler:
            proc.stdin.write("go\n")
            proc.stdin.flush()
            lines = [ln for ln in proc.stdout.read().splitlines() if ln.strip()]
            proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = json.loads(lines[-1]) if lines else {"runs_ended": 0, "errors": runs}
    peak = sampler.peak
    per_run = ((peak["rss_at_peak_mb"] - idle_mb) / peak["in_flight"]
               if peak["in_flight"] else None)
    return {**out, "rss_idle_mb": round(idle_mb, 1),
            "rss_at_peak_mb": round(peak["rss_at_peak_mb"], 1),
            "in_flight_at_rss_sample": peak["in_flight"],
            "mb_per_in_flight_run": None if per_run is None else round(per_run, 3),
            "peak_sessions": peak["sessions"],
            "cpu_s": out.get("cpu_s", round(peak["cpu_s"] - cpu0, 2))}


def _agentops_python() -> str:
    venv = ROOT / ".venv" / "bin" / "python"
    return os.environ.get("BENCH_AGENTOPS_PYTHON") or (str(venv) if venv.exists()
                                                       else sys.executable)


def _agentops_pass(runs: int, model_url: str) -> dict[str, Any]:
    """Run bench/density.py (L = DELAY_S, no cap pass) against ``model_url``; its figures."""
    env = {**os.environ, "BENCH_RUNS": str(runs), "BENCH_DELAY_S": str(DELAY_S),
           "BENCH_STEPS": str(STEPS), "BENCH_CAP": "0", "BENCH_DENSITY_MODEL_URL": model_url,
           "BENCH_ENGINE_DATABASE_URL": AGENTOPS_URL}
    with _Sampler(model_url):
        proc = subprocess.run([_agentops_python(), str(ROOT / "bench" / "density.py")],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode or not lines:
        return {"runs_ended": 0, "errors": runs, "why": f"density.py exit {proc.returncode}"}
    got = json.loads(lines[-1])
    return {"runs_ended": got["ended"].get("succeeded", 0),
            "errors": runs - got["ended"].get("succeeded", 0), "wall_s": got["wall_s"],
            "rss_idle_mb": got["rss_idle_mb"], "rss_at_peak_mb": got["rss_at_peak_mb"],
            "mb_per_in_flight_run": got["mb_per_in_flight_run"],
            "peak_sessions": got["peak_sessions"],
            "cpu_s": round(got["worker_cpu_ms_per_step"] * got["model_calls"] / 1000, 2),
            "runs_running_peak": got["peak_in_flight"], "recoveries": got["recoveries"]}


def _pass(engine: str, runs: int) -> dict[str, Any]:
    """One engine, ``runs`` runs, its own fresh model server; figures read alike for all."""
    server, model_url = model_server_start(DELAY_S, STEPS)
    try:
        got = (_agentops_pass(runs, model_url) if engine == "agentops"
               else _peer_pass(engine, runs, model_url))
        stats = stats_get(model_url)
        steps = replies_figures(stats_get(model_url, "replies")["replies"], DELAY_S)
    finally:
        server.kill()
        server.wait(10)
    ideal = runs / DELAY_S if DELAY_S else None
    mid = steps["steps_per_s_mid"]
    figures = {"peak_in_flight": stats["peak"], "replies": stats["total"],
               "replies_expected": runs * (STEPS + 1), **steps, "ideal_steps_per_s": ideal,
               "mid_vs_ideal": round(mid / ideal, 3) if ideal and mid else None, **got}
    figures["cpu_ms_per_step"] = round(1000 * got["cpu_s"] / max(1, stats["total"]), 2)
    log(f"  {engine}: {stats['total']}/{runs * (STEPS + 1)} replies, peak {stats['peak']} in "
        f"flight, {mid} steps/s mid, p99 above L {steps['above_l_ms'].get('p99')} ms, "
        f"{figures['mb_per_in_flight_run']} MB/run, {got.get('peak_sessions')} sessions")
    return figures


def _window(runs: int, round_no: int, engines: list[str]) -> dict[str, Any]:
    """Each engine in turn on ``runs`` runs, the floor measured before each."""
    floor_url = db_url_suffixed(BASE_URL, "_floor")
    db_ensure(floor_url)
    out: dict[str, Any] = {"runs": runs, "round": round_no, "engines": {}, "floors": {}}
    for engine in engines:
        out["floors"][engine] = round(commit_floor(conninfo=floor_url))
        log(f"N={runs} round {round_no}: {engine} (floor {out['floors'][engine]} commits/s)")
        out["engines"][engine] = _pass(engine, runs)
    floors = sorted(out["floors"].values())
    out["floor_per_s"] = floors[len(floors) // 2]
    out["ratios"] = _ratios(out["engines"])
    log(f"window: {json.dumps(out)}")  # kept on stderr too, should a later window fail
    return out


def _ratios(engines: dict[str, Any]) -> dict[str, float | None]:
    """AgentOps' steps/s (middle half) over each peer's, in the same window."""
    ours = engines.get("agentops", {}).get("steps_per_s_mid")
    return {f"agentops_vs_{name}": (round(ours / e["steps_per_s_mid"], 2)
                                    if ours and e.get("steps_per_s_mid") else None)
            for name, e in engines.items() if name != "agentops"}


def _versions() -> dict[str, str]:
    out = {}
    for pkg in ("dbos", "langgraph", "langgraph-checkpoint-postgres", "psycopg", "openai"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = "missing"
    return out


def main() -> None:
    engines = [e.strip() for e in ENGINES.split(",") if e.strip()]
    missing = missing_peers() if set(engines) - {"agentops"} else []
    if missing:
        log(f"density_peers: {', '.join(missing)} not importable; skipped")
        emit("density_peers", {"skipped": True, "reason": SKIP_REASON})
        return
    log(f"density_peers: N in {RUNS}, L = {DELAY_S} s, {STEPS + 1} calls a run; {SHAPE}")
    windows = [_window(n, r, engines) for r in range(1, ROUNDS + 1) for n in RUNS]
    emit("density_peers", {"delay_s": DELAY_S, "model_calls_per_run": STEPS + 1,
                           "shape": SHAPE, "langgraph_per_run_pool": POOL,
                           "windows": windows, "versions": _versions(),
                           "load_avg": os.getloadavg()[0]})


if __name__ == "__main__":
    main()
