"""trace_overhead: what OpenTelemetry tracing costs a durable no-op step, off and on.

One no-op step (bench-noop: a model turn asking for one no-op tool, plus that call, recorded
durably on PostgreSQL) timed per unit in three builds, interleaved in BENCH_ROUNDS rounds so
a change of load on a shared machine hits each alike:

- ``baseline``: the code before tracing (``git archive`` of BENCH_BASELINE_REF, by default
  the parent of the commit that added agentops/observability/tracing.py) — the same
  measurement imported from that tree;
- ``off``: this tree, tracing off (AGENTOPS_OTLP_ENDPOINT unset);
- ``on``: this tree exporting every span over OTLP/HTTP to a sink process on loopback that
  reads and discards the bodies (the exporter's thread does its real work).

Each pass is its own process with N runs x S steps (BENCH_RUNS, BENCH_STEPS). Figures: the
median unit time, CPU per step (this process's, the exporter's thread included: on a loaded
machine a steadier figure than wall time) and steps/s per build (the median round), the
ratios off / baseline and on / off of each (targets: < 1.05 and < 1.15), and the raw commit
floor measured in the same run.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve()
TREE = HERE.parent.parent
# A pass measures the code of BENCH_CODE_ROOT (the baseline's extracted tree) when set.
sys.path.insert(0, os.environ.get("BENCH_CODE_ROOT") or str(TREE))

from bench._common import engine_env  # noqa: E402

# Its own database: other engine benchmarks may run on the shared one at the same time.
os.environ.setdefault("BENCH_ENGINE_DATABASE_URL",
                      "postgres://postgres@127.0.0.1:5432/agentops_bench_trace")
engine_env(in_process=True)

from bench._common import commit_floor, django_boot, emit, log, median  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "10"))
STEPS = int(os.environ.get("BENCH_STEPS", "100"))
ROUNDS = max(1, int(os.environ.get("BENCH_ROUNDS", "3")))
TARGETS = {"off_vs_baseline": 1.05, "on_vs_off": 1.15}


def _measure() -> dict:
    """Tick RUNS runs of STEPS no-op steps in this process; return unit times."""
    django_boot()
    from runs.engine.runtime import loop
    from runs.services import run_start

    ids = [str(run_start(agent="bench-noop", goal="noop", input={"steps": STEPS}).pk)
           for _ in range(RUNS)]
    times: list[float] = []
    real_unit = loop.unit

    def timed(session):
        t = time.perf_counter()
        real_unit(session)
        times.append(time.perf_counter() - t)

    loop.unit = timed
    started, cpu = time.perf_counter(), time.process_time()
    for run_id in ids:
        assert loop.run_tick(run_id, worker="bench-trace") == "succeeded"
    if os.environ.get("AGENTOPS_OTLP_ENDPOINT"):
        from agentops.observability import tracing

        tracing._state["provider"].force_flush()  # the exporter's CPU is the step's too
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    loop.unit = real_unit
    return {"median_unit_us": round(median(times) * 1e6, 1),
            "cpu_us_per_step": round(cpu / (RUNS * STEPS) * 1e6, 1),
            "steps_per_s": round(RUNS * STEPS / elapsed, 1)}


def _sink() -> None:
    """Serve OTLP/HTTP on an ephemeral loopback port: read each body, answer 200."""
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


def _baseline_tree(into: Path) -> tuple[Path, str]:
    ref = os.environ.get("BENCH_BASELINE_REF") or subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "-1", "--",
         "agentops/observability/tracing.py"], cwd=TREE, capture_output=True, text=True,
        check=True).stdout.strip() + "^"
    sha = subprocess.run(["git", "rev-parse", "--short", ref], cwd=TREE, capture_output=True,
                         text=True, check=True).stdout.strip()
    archive = subprocess.run(["git", "archive", ref], cwd=TREE, capture_output=True,
                             check=True).stdout
    tar_path = into / "baseline.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree", sha


def _pass(build: str, baseline: Path, sink_port: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTOPS_OTLP_ENDPOINT",
                                                            "AGENTOPS_TRACE_CONTENT")}
    if build == "baseline":
        env["BENCH_CODE_ROOT"] = str(baseline)
        # Its own database, migrated by its own tree: the newer schema has columns it lacks.
        env["BENCH_ENGINE_DATABASE_URL"] = os.environ["BENCH_ENGINE_DATABASE_URL"] + "_baseline"
    elif build == "on":
        env["AGENTOPS_OTLP_ENDPOINT"] = f"http://127.0.0.1:{sink_port}"
    out = subprocess.run([sys.executable, str(HERE), "--measure"], env=env, cwd=TREE,
                         capture_output=True, text=True, timeout=900)
    if out.returncode:
        raise RuntimeError(f"{build} pass failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _ratio(one_round: dict, build: str, against: str) -> float:
    return round(one_round[build]["median_unit_us"] / one_round[against]["median_unit_us"], 3)


def main() -> None:
    url = django_boot()
    with tempfile.TemporaryDirectory() as tmp:
        baseline, sha = _baseline_tree(Path(tmp))
        sink = subprocess.Popen([sys.executable, str(HERE), "--sink"], stdout=subprocess.PIPE,
                                text=True)
        try:
            port = int(sink.stdout.readline())
            rounds, floors = [], []
            for n in range(ROUNDS):
                floors.append(commit_floor(conninfo=url))
                one = {b: _pass(b, baseline, port) for b in ("baseline", "off", "on")}
                log(f"round {n + 1}: {one}")
                rounds.append(one)
        finally:
            sink.terminate()
    figures = {b: {k: median([r[b][k] for r in rounds]) for k in rounds[0][b]}
               for b in ("baseline", "off", "on")}
    unit = {b: figures[b]["median_unit_us"] for b in figures}
    cpu = {b: figures[b]["cpu_us_per_step"] for b in figures}
    ratios = {"off_vs_baseline": round(unit["off"] / unit["baseline"], 3),
              "on_vs_off": round(unit["on"] / unit["off"], 3),
              "cpu_off_vs_baseline": round(cpu["off"] / cpu["baseline"], 3),
              "cpu_on_vs_off": round(cpu["on"] / cpu["off"], 3)}
    emit("trace_overhead", {
        "baseline_ref": sha, "runs": RUNS, "steps": STEPS, "rounds": ROUNDS, **figures,
        **ratios, "per_round": [{"off_vs_baseline": _ratio(r, "off", "baseline"),
                                 "on_vs_off": _ratio(r, "on", "off")} for r in rounds],
        "commit_floor_per_s": round(median(floors)), "targets": TARGETS})
    log(f"median unit: baseline {unit['baseline']} us, off {unit['off']} us, on {unit['on']} us;"
        f" off/baseline {ratios['off_vs_baseline']} (< {TARGETS['off_vs_baseline']}),"
        f" on/off {ratios['on_vs_off']} (< {TARGETS['on_vs_off']});"
        f" commit floor {round(median(floors))}/s")


if __name__ == "__main__":
    if "--measure" in sys.argv:
        print(json.dumps(_measure()))
    elif "--sink" in sys.argv:
        _sink()
    else:
        main()
