"""density: N runs whose model takes L seconds a call, ONE worker host with default settings.

A real model server (bench.model_server, its own process) sleeps L seconds per chat
completion and is reached through the real ``openai`` client (agent ``bench-remote``). One
``manage.py agentops worker`` host (default settings: its q2 processes keep many runs in
flight each, runs.slots) works N runs of S tool steps each (S + 1 model calls a run).
Figures: runs in flight (peak of runs held by the worker at once), steps/s (model replies
per second: overall, and over the middle half of the busy window) against the ideal N / L,
p99 step latency above L (the gap between two model replies of a run, minus L), memory per
in-flight run (worker host RSS at peak minus idle, over the peak in flight), connections
(the host's PostgreSQL sessions, peak), the host's CPU per model reply (in all, over the
middle half of the busy window (the steady state, without the runs' claims, starts and ends),
and by role: parent, q2 sentinel, q2 worker processes, lease keepers), and the machine's commit
floor. Ramp-up: seconds from the first tick enqueued to the peak, and to 90% and 100% of N
runs in flight. Ticks:
q2 tasks enqueued and taken by the host (``django_q_ormq`` rows inserted and locked, from
pg_stat_user_tables), and taken per second of the pass.

The engine's own cap is measured first in the same run (the same N runs, L = 0); the ideal
is min(N / L, that cap). Lease expiries of the runs (``run.recovered`` events) are reported:
a healthy worker has none.

Env: BENCH_RUNS (500), BENCH_DELAY_S (1.0), BENCH_STEPS (20), BENCH_CAP (1: measure the cap),
BENCH_WORKER_LOG (file for the worker host's output), BENCH_WORKER_LOG_LEVEL (ERROR),
BENCH_DENSITY_MODEL_URL (a model server already running, sleeping BENCH_DELAY_S: used instead
of starting one; bench/density_peers.py reads the same server for every engine).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._common import engine_env  # noqa: E402
from bench.model_server import model_env, model_server_start  # noqa: E402

os.environ.setdefault("BENCH_ENGINE_DATABASE_URL",
                      "postgres://postgres@127.0.0.1:5432/agentops_bench_density")
engine_env(in_process=False)
os.environ["AGENTOPS_ENQUEUE_TICKS"] = "1"

from bench._common import (bench_url, commit_floor, django_boot, emit, log,  # noqa: E402
                           percentiles)

RUNS = int(os.environ.get("BENCH_RUNS", "500"))
DELAY_S = float(os.environ.get("BENCH_DELAY_S", "1.0"))
STEPS = int(os.environ.get("BENCH_STEPS", "20"))


def _worker(model_url: str) -> subprocess.Popen:
    """Start one worker host with the default settings (only the agents and the model)."""
    env = {**os.environ, "DATABASE_URL": bench_url(), "AGENTOPS_AGENTS": "bench.agents",
           **model_env(model_url),
           "LOG_LEVEL": os.environ.get("BENCH_WORKER_LOG_LEVEL", "ERROR")}
    for knob in ("AGENTOPS_ENQUEUE_TICKS", "AGENTOPS_TICK_SLICE_S", "TEST_DATABASE_NAME"):
        env.pop(knob, None)
    out = open(os.environ.get("BENCH_WORKER_LOG", os.devnull), "ab")  # noqa: SIM115
    return subprocess.Popen([sys.executable, "manage.py", "agentops", "worker"], cwd=ROOT,
                            env=env, stdout=out, stderr=out, start_new_session=True)


def _wait_up(pgid: int, timeout_s: float = 60.0) -> None:
    """Wait until the host runs all its processes (parent, sentinel, q2
    workers), then let them settle: the idle RSS is measured after."""
    from django.conf import settings

    deadline = time.monotonic() + timeout_s
    while len(_group(pgid)) < 2 + settings.Q_CLUSTER["workers"]:
        if time.monotonic() > deadline:
            raise RuntimeError("the worker host did not come up")
        time.sleep(0.5)
    time.sleep(3)


def _group(pgid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "-g", str(pgid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def _rss_mb(pids: list[int], field: str = "Rss:") -> float:
    """Return the processes' RSS summed (``field`` "Pss:": their PSS, shared pages counted
    once in all), from /proc/<pid>/smaps_rollup."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith(field):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def _cpu_s(pids: list[int]) -> float:
    """Return the CPU seconds (user + system, all threads) the processes have used so far."""
    return sum(_cpu_roles(pids).values())


def _cpu_roles(pids: list[int]) -> dict[str, float]:
    """Return the CPU seconds (user + system, all threads) each host role has used so far:
    ``parent`` (the host's own process: recoverer, sweeper, notify sender), ``sentinel``
    (q2's sentinel with its pusher and monitor threads), ``q2_workers`` (the processes that
    run the slots) and ``keepers`` (the lease keepers), from /proc/<pid>/stat."""
    tick = os.sysconf("SC_CLK_TCK")
    total = dict.fromkeys(("parent", "sentinel", "q2_workers", "keepers"), 0.0)
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            keeper = b"keeper_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        ppid, pgid = int(fields[1]), int(fields[2])
        role = ("keepers" if keeper else "parent" if pid == pgid
                else "sentinel" if ppid == pgid else "q2_workers")
        total[role] += (int(fields[11]) + int(fields[12])) / tick
    return total


def _sessions(pids: list[int]) -> int:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE ANY(%s)",
                    [[f"%:{p}" for p in pids]])
        return cur.fetchone()[0]


def _clean() -> None:
    """Drop what an earlier (interrupted) bench left: unfinished runs and queued ticks."""
    from django_q.models import OrmQ

    from runs.models import Run

    OrmQ.objects.all().delete()
    Run.objects.filter(status__in=("queued", "running", "waiting")).delete()


def _create_runs() -> list:
    """Create the runs (queued, ticks not yet enqueued) and return their ids."""
    from django.conf import settings

    from runs.services import run_start

    settings.AGENTOPS_ENQUEUE_TICKS = False
    tag = os.urandom(4).hex()  # the model server counts calls per goal
    ids = [run_start(agent="bench-remote", goal=f"density {tag} {i}", input={}).pk
           for i in range(RUNS)]
    settings.AGENTOPS_ENQUEUE_TICKS = True
    return ids


def _watch(ids: list, pgid: int, idle_mb: float) -> dict:
    """Enqueue every run's tick, then sample the host until all runs end."""
    from django.db.models import Count

    from runs.models import Run
    from runs.engine.runtime.queue import enqueue_tick

    t0 = time.monotonic()
    for pk in ids:
        enqueue_tick(pk)
    peak = {"in_flight": 0, "sessions": 0, "rss_mb": idle_mb, "rss_at_peak_mb": idle_mb,
            "cpu_s": {}, "cpu_samples": []}
    cpu0 = _cpu_roles(_group(pgid))
    while time.monotonic() - t0 < 600 + 5 * RUNS * (STEPS + 1) * DELAY_S:
        running = Run.objects.filter(pk__in=ids, status="running").count()
        pids = _group(pgid)
        rss = _rss_mb(pids)
        if running > peak["in_flight"]:
            peak.update(in_flight=running, rss_at_peak_mb=rss, pss_at_peak_mb=_rss_mb(pids, "Pss:"),
                        to_peak_s=round(time.monotonic() - t0, 1))
        for share in (0.9, 1.0):
            if running >= share * RUNS and f"to_{share:.0%}_s" not in peak:
                peak[f"to_{share:.0%}_s"] = round(time.monotonic() - t0, 1)
        peak["sessions"] = max(peak["sessions"], _sessions(pids))
        peak["processes"] = max(peak.get("processes", 0), len(pids))
        peak["rss_mb"] = max(peak["rss_mb"], rss)
        peak["cpu_s"] = {k: v - cpu0[k] for k, v in _cpu_roles(pids).items()}
        peak["cpu_samples"].append((time.time(), sum(peak["cpu_s"].values())))
        if not Run.objects.filter(pk__in=ids).exclude(status__in=("succeeded", "failed",
                                                                  "blocked")).exists():
            break
        time.sleep(0.5)
    peak["wall_s"] = time.monotonic() - t0
    peak["ended"] = dict(Run.objects.filter(pk__in=ids).values("status")
                         .annotate(n=Count("pk")).values_list("status", "n"))
    return peak


def _q2_rows() -> dict:
    """Return q2's queue-table row counters: inserted = ticks enqueued, updated = taken."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute("SELECT n_tup_ins, n_tup_upd FROM pg_stat_user_tables "
                    "WHERE relname = 'django_q_ormq'")
        ins, upd = cur.fetchone()
    return {"enqueued": ins, "taken": upd}


def _steps(ids: list, delay_s: float) -> dict:
    """Steps/s and step latency above L from the runs' model.replied events."""
    from runs.models import Event

    rows = list(Event.objects.filter(run_id__in=ids, type="model.replied")
                .order_by("run_id", "seq").values_list("run_id", "at"))
    times = sorted(at.timestamp() for _, at in rows)
    gaps = [(b[1] - a[1]).total_seconds() - delay_s
            for a, b in zip(rows, rows[1:]) if a[0] == b[0]]
    first, last = times[0], times[-1]
    q1, q3 = first + (last - first) / 4, first + 3 * (last - first) / 4
    middle = sum(1 for t in times if q1 <= t <= q3)
    return {"model_calls": len(times), "steps_per_s": round(len(times) / (last - first), 1),
            "steps_per_s_mid": round(middle / (q3 - q1), 1), "mid": (q1, q3, times),
            "above_l_ms": {k: round(v * 1000, 1) if k != "n" else v
                           for k, v in percentiles(gaps).items()}}


def _cpu_mid(samples: list[tuple[float, float]], mid: tuple) -> float | None:
    """Return the host's CPU ms per model reply over the middle half of the busy window.

    Between the first CPU sample at or after its start and the last at or before its end,
    over the replies between those two samples: the steady state, without the runs' claims,
    starts and ends that the whole pass's figure also spreads over the replies.
    """
    q1, q3, times = mid
    inside = [(t, cpu) for t, cpu in samples if q1 <= t <= q3]
    if len(inside) < 2:
        return None
    (t0, cpu0), (t1, cpu1) = inside[0], inside[-1]
    replies = sum(1 for t in times if t0 <= t <= t1)
    return round(1000 * (cpu1 - cpu0) / replies, 2) if replies else None


def _recoveries(ids: list) -> dict:
    """Lease expiries and owner-gone recoveries of the runs (a healthy worker should have 0)."""
    from django.db.models import Count

    from runs.models import Event

    rows = (Event.objects.filter(run_id__in=ids, type="run.recovered")
            .values("data__cause").annotate(n=Count("pk")))
    return {r["data__cause"] or "unknown": r["n"] for r in rows}


def _pass(delay_s: float) -> dict:
    """One worker host works RUNS runs whose model takes ``delay_s``; return its figures."""
    external = os.environ.get("BENCH_DENSITY_MODEL_URL")
    server, url = (None, external) if external else model_server_start(delay_s, STEPS)
    host = _worker(url)
    rows0 = _q2_rows()
    try:
        _wait_up(host.pid)
        idle_mb = _rss_mb(_group(host.pid))
        idle_pss_mb = _rss_mb(_group(host.pid), "Pss:")
        log(f"worker host up, {idle_mb:.0f} MB idle; creating {RUNS} runs")
        ids = _create_runs()
        log(f"{RUNS} runs created; enqueueing, model {delay_s}s x {STEPS + 1} calls a run")
        peak = _watch(ids, host.pid, idle_mb)
    finally:
        os.killpg(host.pid, 15)
        host.wait(30)
        if server is not None:
            server.kill()
    time.sleep(1)  # the host's last table counters reach pg_stat once its sessions end
    ticks = {k: v - rows0[k] for k, v in _q2_rows().items()}
    ticks["taken_per_s"] = round(ticks["taken"] / peak["wall_s"], 1)
    return {"peak": peak, "idle_mb": idle_mb, "idle_pss_mb": idle_pss_mb, "steps": _steps(ids, delay_s),
            "recoveries": _recoveries(ids), "ticks": ticks}


def main() -> None:
    django_boot()
    from django.db import connection

    _clean()
    floor = commit_floor(conninfo=bench_url())
    # The engine's own cap, same host, same window: the same runs with a model that answers
    # at once. The ideal at L is min(N / L, that cap).
    # (Not against an external model server: it sleeps L.)
    measure_cap = (os.environ.get("BENCH_CAP", "1") == "1"
                   and not os.environ.get("BENCH_DENSITY_MODEL_URL"))
    cap = _pass(0.0)["steps"]["steps_per_s_mid"] if measure_cap else None
    got = _pass(DELAY_S)
    peak, steps, idle_mb = got["peak"], got["steps"], got["idle_mb"]
    ideal = min(x for x in (RUNS / DELAY_S if DELAY_S else None, cap) if x is not None)
    emit("density", {
        "runs": RUNS, "delay_s": DELAY_S, "model_calls_per_run": STEPS + 1,
        "wall_s": round(peak["wall_s"], 1), "ended": peak["ended"],
        "peak_in_flight": peak["in_flight"], "to_peak_s": peak.get("to_peak_s"),
        "to_90%_in_flight_s": peak.get("to_90%_s"), "to_100%_in_flight_s": peak.get("to_100%_s"),
        "ticks": got["ticks"], **{k: v for k, v in steps.items() if k != "mid"},
        "recoveries": got["recoveries"],
        "n_over_l": RUNS / DELAY_S if DELAY_S else None, "engine_cap_steps_per_s": cap,
        "ideal_steps_per_s": ideal, "mid_vs_ideal": round(steps["steps_per_s_mid"] / ideal, 3),
        "rss_idle_mb": round(idle_mb, 1), "rss_at_peak_mb": round(peak["rss_at_peak_mb"], 1),
        "mb_per_in_flight_run": round((peak["rss_at_peak_mb"] - idle_mb)
                                      / max(1, peak["in_flight"]), 3),
        "pss_idle_mb": round(got["idle_pss_mb"], 1),
        "pss_at_peak_mb": round(peak.get("pss_at_peak_mb", got["idle_pss_mb"]), 1),
        "pss_mb_per_in_flight_run": round((peak.get("pss_at_peak_mb", got["idle_pss_mb"])
                                           - got["idle_pss_mb"]) / max(1, peak["in_flight"]), 3),
        "host_processes_at_peak": peak.get("processes"),
        "worker_cpu_ms_per_step": round(1000 * sum(peak["cpu_s"].values())
                                        / steps["model_calls"], 1),
        "cpu_ms_per_step_by_role": {k: round(1000 * v / steps["model_calls"], 2)
                                    for k, v in peak["cpu_s"].items()},
        "worker_cpu_ms_per_step_mid": _cpu_mid(peak["cpu_samples"], steps["mid"]),
        "peak_sessions": peak["sessions"], "commit_floor_per_s": round(floor),
        "load_avg": os.getloadavg()[0], "db": connection.settings_dict["NAME"]})


if __name__ == "__main__":
    main()
