"""trace_overhead: what OpenTelemetry tracing costs a durable no-op step, off and on.

One no-op step (bench-noop: a model turn asking for one no-op tool, plus that call, recorded
durably on PostgreSQL) timed per unit in three builds, interleaved in BENCH_ROUNDS rounds (the
order rotating each round) so a change of load on a shared machine hits each alike:

- ``baseline``: the code before tracing (``git archive`` of BENCH_BASELINE_REF, by default
  the parent of the commit that added agentops/observability/tracing.py) — the same
  measurement imported from that tree, in its own database (its schema is older);
- ``off``: this tree, tracing off (AGENTOPS_OTLP_ENDPOINT unset);
- ``on``: this tree exporting every span over OTLP/HTTP to a sink process on loopback that
  reads and discards the bodies (the exporter's thread does its real work).

Each pass is its own process with N runs x S steps (BENCH_RUNS, BENCH_STEPS). Figures per
build (the median round): the median unit's wall time and its CPU time (this thread's), CPU
per step (the process's, the exporter's thread included) and steps/s; the ratios off /
baseline and on / off of each (targets: < 1.05 and < 1.15), also as the median of the rounds'
own ratios (``paired``: the two passes of a ratio ran back to back); and the raw commit
floor measured in the same run.

``off`` against ``baseline`` weighs everything this tree added since the baseline, tracing or
not. What tracing itself costs with it off is measured once more, directly: a fourth pass
(``hooks``, off, same N x S) times every call into runs.engine.runtime.trace_spans (the
engine's only way into tracing) and gives their time per step, less the timer's own cost.
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


def _hooks_timed() -> dict[str, float]:
    """Wrap every function of trace_spans in a timer; return the running totals."""
    import inspect

    from runs.engine.runtime import trace_spans

    totals = {"s": 0.0, "calls": 0}

    def timed(fn):
        def call(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                totals["s"] += time.perf_counter() - t
                totals["calls"] += 1
        return call

    for name, fn in inspect.getmembers(trace_spans, inspect.isfunction):
        if fn.__module__ == trace_spans.__name__ and not name.startswith("_"):
            setattr(trace_spans, name, timed(fn))
    bare = timed(lambda: None)  # the timer's own cost per call, taken off the total
    t = time.perf_counter()
    for _ in range(100_000):
        bare()
    totals["timer_s"] = (time.perf_counter() - t) / 100_000
    totals["s"], totals["calls"] = 0.0, 0
    return totals


def _measure() -> dict:
    """Tick RUNS runs of STEPS no-op steps in this process; return unit times."""
    django_boot()
    from runs.engine.runtime import loop
    from runs.services import run_start

    hooks = _hooks_timed() if os.environ.get("BENCH_TIME_HOOKS") else None

    ids = [str(run_start(agent="bench-noop", goal="noop", input={"steps": STEPS}).pk)
           for _ in range(RUNS)]
    times: list[float] = []  # µs: median() rounds to 3 places, which in seconds would be 1 ms
    cpus: list[float] = []
    real_unit = loop.unit

    def timed(session):
        t, c = time.perf_counter(), time.thread_time()
        real_unit(session)
        cpus.append((time.thread_time() - c) * 1e6)
        times.append((time.perf_counter() - t) * 1e6)

    loop.unit = timed
    started, cpu = time.perf_counter(), time.process_time()
    for run_id in ids:
        assert loop.run_tick(run_id, worker="bench-trace") == "succeeded"
    if os.environ.get("AGENTOPS_OTLP_ENDPOINT"):
        from agentops.observability import tracing

        tracing._state["provider"].force_flush()  # the exporter's CPU is the step's too
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    loop.unit = real_unit
    if hooks is not None:
        spent = max(hooks["s"] - hooks["calls"] * hooks["timer_s"], 0.0)
        return {"hook_calls_per_step": round(hooks["calls"] / (RUNS * STEPS), 2),
                "hooks_us_per_step": round(spent / (RUNS * STEPS) * 1e6, 2),
                "cpu_us_per_step": round(cpu / (RUNS * STEPS) * 1e6, 1)}
    return {"median_unit_us": round(median(times), 1),
            "median_unit_cpu_us": round(median(cpus), 1),
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
    if build == "hooks":
        env["BENCH_TIME_HOOKS"] = "1"
    elif build == "baseline":
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


BUILDS = ("baseline", "off", "on")
# Each ratio: (the build measured, the build it is measured against).
PAIRS = {"off_vs_baseline": ("off", "baseline"), "on_vs_off": ("on", "off")}


def _rounds(baseline: Path, port: int, url: str) -> tuple[list[dict], list[float]]:
    """Run ROUNDS rounds of the three passes, the order rotating; return them and the floors."""
    rounds, floors = [], []
    for n in range(ROUNDS):
        floors.append(commit_floor(conninfo=url))
        order = BUILDS[n % 3:] + BUILDS[:n % 3]
        one = {b: _pass(b, baseline, port) for b in order}
        log(f"round {n + 1} ({', '.join(order)}): {one}")
        rounds.append(one)
    return rounds, floors


def _ratios(figures: dict, rounds: list[dict]) -> dict:
    """Return each ratio of the median figures, and the median of the rounds' own (paired)."""
    out = {}
    for name, (build, against) in PAIRS.items():
        for prefix, key in (("", "median_unit_us"), ("unit_cpu_", "median_unit_cpu_us"),
                            ("cpu_", "cpu_us_per_step")):
            out[prefix + name] = round(figures[build][key] / figures[against][key], 3)
        out["paired_cpu_" + name] = round(median(
            [r[build]["cpu_us_per_step"] / r[against]["cpu_us_per_step"] for r in rounds]), 3)
    return out


def main() -> None:
    url = django_boot()
    with tempfile.TemporaryDirectory() as tmp:
        baseline, sha = _baseline_tree(Path(tmp))
        sink = subprocess.Popen([sys.executable, str(HERE), "--sink"], stdout=subprocess.PIPE,
                                text=True)
        try:
            rounds, floors = _rounds(baseline, int(sink.stdout.readline()), url)
        finally:
            sink.terminate()
        hooks = _pass("hooks", baseline, 0)
    figures = {b: {k: median([r[b][k] for r in rounds]) for k in rounds[0][b]} for b in BUILDS}
    ratios = _ratios(figures, rounds)
    hooks["share_of_off_step"] = round(hooks["hooks_us_per_step"]
                                       / figures["off"]["cpu_us_per_step"], 4)
    floor = round(median(floors))
    emit("trace_overhead", {
        "baseline_ref": sha, "runs": RUNS, "steps": STEPS, "rounds": ROUNDS, **figures,
        **ratios, "hooks_off": hooks,
        "per_round": [{name: round(r[b]["cpu_us_per_step"] / r[a]["cpu_us_per_step"], 3)
                       for name, (b, a) in PAIRS.items()} for r in rounds],
        "commit_floor_per_s": floor, "targets": TARGETS})
    log(f"CPU per step: off/baseline {ratios['cpu_off_vs_baseline']} (paired"
        f" {ratios['paired_cpu_off_vs_baseline']}; < {TARGETS['off_vs_baseline']}), on/off"
        f" {ratios['cpu_on_vs_off']} (paired {ratios['paired_cpu_on_vs_off']};"
        f" < {TARGETS['on_vs_off']}); tracing hooks off {hooks['hooks_us_per_step']} us/step"
        f" ({hooks['share_of_off_step']:.2%}); commit floor {floor}/s")


if __name__ == "__main__":
    if "--measure" in sys.argv:
        print(json.dumps(_measure()))
    elif "--sink" in sys.argv:
        _sink()
    else:
        main()
