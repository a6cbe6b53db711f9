"""trace_overhead: what OpenTelemetry tracing costs a durable no-op step, off and on.

One no-op step (bench-noop: a model turn asking for one no-op tool, plus that call, recorded
durably on PostgreSQL) in three builds, each a long-lived process on its own:

- ``baseline``: the code before tracing (``git archive`` of BENCH_BASELINE_REF, by default
  the parent of the commit that added agentops/observability/tracing.py) — the same
  measurement imported from that tree, in its own database (its schema is older);
- ``off``: this tree, tracing off (AGENTOPS_OTLP_ENDPOINT unset);
- ``on``: this tree exporting every span over OTLP/HTTP to a sink process on loopback that
  reads and discards the bodies (the exporter's thread does its real work: each chunk ends
  with a flush, so its CPU is the chunk's).

The builds take turns in lockstep: a round gives each build one chunk (BENCH_RUNS runs of
BENCH_STEPS steps, one after another, the order rotating each round), so a change of load on
a shared machine hits the builds of a round alike; BENCH_ROUNDS rounds after one warm-up
chunk each. A chunk's figures: CPU per step (its process's, threads included), its units'
wall and CPU times (a unit is one step here). The ratios ``off_vs_baseline`` and
``on_vs_off`` (targets < 1.05 and < 1.15) are the median over the rounds of that round's
ratio of CPU per step; beside them the ratios of the median unit (wall and CPU) over all
rounds, and the raw commit floor measured before each round.

On a machine other work keeps busy, CPU time still moves with it (caches, frequency), so
one more figure does not: the Python calls a step makes (every function and builtin call,
counted with ``sys.setprofile`` over one chunk), in a process of ``baseline`` and of ``off``.

``off`` against ``baseline`` weighs everything this tree added since the baseline, tracing or
not. What tracing itself costs with it off is measured directly too: a process
(``hooks``: off, every function of runs.engine.runtime.trace_spans, the engine's only way into
tracing, wrapped in a timer) gives their time per step, less the bare timer's cost: an upper
bound (a wrapper passing keyword arguments costs more than the bare one).
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
# A process measures the code of BENCH_CODE_ROOT (the baseline's extracted tree) when set.
sys.path.insert(0, os.environ.get("BENCH_CODE_ROOT") or str(TREE))

from bench._common import engine_env  # noqa: E402

# Its own database: other engine benchmarks may run on the shared one at the same time.
os.environ.setdefault("BENCH_ENGINE_DATABASE_URL",
                      "postgres://postgres@127.0.0.1:5432/agentops_bench_trace")
engine_env(in_process=True)

from bench._common import commit_floor, django_boot, emit, log, median  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "1"))
STEPS = int(os.environ.get("BENCH_STEPS", "100"))
ROUNDS = max(1, int(os.environ.get("BENCH_ROUNDS", "15")))
HOOK_CHUNKS = 3
TARGETS = {"off_vs_baseline": 1.05, "on_vs_off": 1.15}
BUILDS = ("baseline", "off", "on")
# Each ratio: (the build measured, the build it is measured against).
PAIRS = {"off_vs_baseline": ("off", "baseline"), "on_vs_off": ("on", "off")}
_SAY = "@trace_overhead "  # marks the lines a measuring process answers with on stdout


def _hooks_timed() -> dict[str, float]:
    """Wrap every public function of trace_spans in a timer; return the running totals."""
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
    bare = timed(lambda: None)
    t = time.perf_counter()
    for _ in range(100_000):
        bare()
    totals["timer_s"] = (time.perf_counter() - t) / 100_000
    return totals


def _calls_counted(loop, run_start) -> dict:
    """Count the Python calls one chunk makes (a figure the machine's load does not move)."""
    counted = {"calls": 0}
    real_tick = loop.run_tick

    def counter(frame, event, arg):
        if event in ("call", "c_call"):
            counted["calls"] += 1

    def tick(*args, **kwargs):
        sys.setprofile(counter)
        try:
            return real_tick(*args, **kwargs)
        finally:
            sys.setprofile(None)

    loop.run_tick = tick
    try:
        _chunk(loop, run_start, None)
    finally:
        loop.run_tick = real_tick
    return {"calls_per_step": round(counted["calls"] / (RUNS * STEPS), 1)}


def _chunk(loop, run_start, hooks: dict | None) -> dict:
    """Tick RUNS fresh runs of STEPS no-op steps; return this chunk's figures."""
    ids = [str(run_start(agent="bench-noop", goal="noop", input={"steps": STEPS}).pk)
           for _ in range(RUNS)]
    walls: list[float] = []
    cpus: list[float] = []
    real_unit = loop.unit

    def timed(session):
        t, c = time.perf_counter(), time.thread_time()
        real_unit(session)
        cpus.append(round((time.thread_time() - c) * 1e6, 1))
        walls.append(round((time.perf_counter() - t) * 1e6, 1))

    if hooks is not None:
        hooks["s"], hooks["calls"] = 0.0, 0
    loop.unit = timed
    started, cpu = time.perf_counter(), time.process_time()
    for run_id in ids:
        assert loop.run_tick(run_id, worker="bench-trace") == "succeeded"
    if os.environ.get("AGENTOPS_OTLP_ENDPOINT"):
        from agentops.observability import tracing

        tracing._state["provider"].force_flush()  # the exporter's CPU is the step's too
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    loop.unit = real_unit
    out = {"cpu_us_per_step": round(cpu / (RUNS * STEPS) * 1e6, 1),
           "steps_per_s": round(RUNS * STEPS / elapsed, 1), "unit_wall_us": walls,
           "unit_cpu_us": cpus}
    if hooks is not None:
        spent = max(hooks["s"] - hooks["calls"] * hooks["timer_s"], 0.0)
        out["hook_calls"], out["hooks_s"] = hooks["calls"], spent
    return out


def _serve() -> None:
    """Boot, say "ready", then measure one chunk per line read on stdin until it closes."""
    django_boot()
    from runs.engine.runtime import loop
    from runs.services import run_start

    hooks = _hooks_timed() if os.environ.get("BENCH_TIME_HOOKS") else None
    print(f"{_SAY}ready", flush=True)
    for line in sys.stdin:
        out = (_calls_counted(loop, run_start) if line.strip() == "calls"
               else _chunk(loop, run_start, hooks))
        print(_SAY + json.dumps(out), flush=True)


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


class _Build:
    """One build's measuring process: started booted, asked for one chunk at a time."""

    def __init__(self, build: str, baseline: Path, sink_port: int) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("AGENTOPS_OTLP_ENDPOINT",
                                                                "AGENTOPS_TRACE_CONTENT")}
        if build == "hooks":
            env["BENCH_TIME_HOOKS"] = "1"
        elif build == "baseline":
            env["BENCH_CODE_ROOT"] = str(baseline)
            # Its own database, migrated by its own tree: the newer schema has columns it lacks.
            env["BENCH_ENGINE_DATABASE_URL"] = (os.environ["BENCH_ENGINE_DATABASE_URL"]
                                                + "_baseline")
        elif build == "on":
            env["AGENTOPS_OTLP_ENDPOINT"] = f"http://127.0.0.1:{sink_port}"
        self.name = build
        self.proc = subprocess.Popen([sys.executable, str(HERE), "--serve"], env=env, cwd=TREE,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._read("ready")

    def _read(self, expect: str = "") -> str:
        """Return the process's next answer (other output it prints is passed over)."""
        for line in self.proc.stdout:
            if line.startswith(_SAY):
                answer = line[len(_SAY):].strip()
                if expect and answer != expect:
                    raise RuntimeError(f"the {self.name} process answered {answer!r}")
                return answer
        raise RuntimeError(f"the {self.name} process ended (exit {self.proc.wait()})")

    def chunk(self, what: str = "chunk") -> dict:
        """Measure one chunk in this build's process (``calls``: count them); return figures."""
        self.proc.stdin.write(what + "\n")
        self.proc.stdin.flush()
        return json.loads(self._read())

    def close(self) -> None:
        """Let the process end (stdin closed), as a worker exits."""
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _rounds(builds: dict[str, _Build], url: str) -> tuple[list[dict], list[float]]:
    """Run ROUNDS rounds of one chunk per build, the order rotating; return them and floors."""
    for b in builds.values():
        b.chunk()  # warm-up: first calls, prepared statements, the exporter's connection
    rounds, floors = [], []
    for n in range(ROUNDS):
        floors.append(commit_floor(conninfo=url))
        order = BUILDS[n % 3:] + BUILDS[:n % 3]
        one = {b: builds[b].chunk() for b in order}
        log(f"round {n + 1} ({', '.join(order)}): CPU us/step "
            + ", ".join(f"{b} {one[b]['cpu_us_per_step']}" for b in order)
            + f"; floor {round(floors[-1])}/s")
        rounds.append(one)
    return rounds, floors


def _figures(rounds: list[dict]) -> dict:
    """Return each build's medians: unit wall and CPU over all units, per-chunk CPU, steps/s."""
    out = {}
    for b in BUILDS:
        chunks = [r[b] for r in rounds]
        out[b] = {"median_unit_us": median([u for c in chunks for u in c["unit_wall_us"]]),
                  "median_unit_cpu_us": median([u for c in chunks for u in c["unit_cpu_us"]]),
                  "cpu_us_per_step": median([c["cpu_us_per_step"] for c in chunks]),
                  "steps_per_s": median([c["steps_per_s"] for c in chunks])}
    return out


def _ratios(figures: dict, rounds: list[dict]) -> dict:
    """Return each ratio: paired (the median of the rounds' own), and of the medians.

    ``paired_unit_cpu_*``: the rounds' ratios of their median unit's CPU, which a unit slowed
    by the machine's other work moves less than it moves a chunk's CPU per step.
    """
    out = {}
    for name, (build, against) in PAIRS.items():
        out[name] = median([r[build]["cpu_us_per_step"] / r[against]["cpu_us_per_step"]
                            for r in rounds])
        out["paired_unit_cpu_" + name] = median([
            median(r[build]["unit_cpu_us"]) / median(r[against]["unit_cpu_us"]) for r in rounds])
        for prefix, key in (("wall_", "median_unit_us"), ("unit_cpu_", "median_unit_cpu_us"),
                            ("cpu_", "cpu_us_per_step")):
            out[prefix + name] = round(figures[build][key] / figures[against][key], 3)
    return out


def _hooks(build: _Build) -> dict:
    """Return what the tracing hooks cost a step with tracing off (HOOK_CHUNKS chunks)."""
    chunks = [build.chunk() for _ in range(HOOK_CHUNKS + 1)][1:]
    steps = HOOK_CHUNKS * RUNS * STEPS
    return {"hook_calls_per_step": round(sum(c["hook_calls"] for c in chunks) / steps, 2),
            "hooks_us_per_step": round(sum(c["hooks_s"] for c in chunks) / steps * 1e6, 2)}


def main() -> None:
    url = django_boot()
    with tempfile.TemporaryDirectory() as tmp:
        baseline, sha = _baseline_tree(Path(tmp))
        sink = subprocess.Popen([sys.executable, str(HERE), "--sink"], stdout=subprocess.PIPE,
                                text=True)
        builds: dict[str, _Build] = {}
        try:
            port = int(sink.stdout.readline())
            builds = {b: _Build(b, baseline, port) for b in BUILDS}
            rounds, floors = _rounds(builds, url)
            calls = {b: builds[b].chunk("calls")["calls_per_step"] for b in ("baseline", "off")}
            builds["hooks"] = _Build("hooks", baseline, port)
            hooks = _hooks(builds["hooks"])
        finally:
            for b in builds.values():
                b.close()
            sink.terminate()
    figures = _figures(rounds)
    ratios = _ratios(figures, rounds)
    hooks["share_of_off_step"] = round(hooks["hooks_us_per_step"]
                                       / figures["off"]["cpu_us_per_step"], 4)
    floor = round(median(floors))
    emit("trace_overhead", {
        "baseline_ref": sha, "runs": RUNS, "steps": STEPS, "rounds": ROUNDS, **figures,
        **ratios, "hooks_off": hooks, "calls_per_step": calls,
        "calls_off_vs_baseline": round(calls["off"] / calls["baseline"], 3),
        "per_round": [{name: round(r[b]["cpu_us_per_step"] / r[a]["cpu_us_per_step"], 3)
                       for name, (b, a) in PAIRS.items()} for r in rounds],
        "commit_floor_per_s": floor, "commit_floor_range": [round(min(floors)),
                                                            round(max(floors))],
        "targets": TARGETS})
    log(f"CPU per step, median of the rounds' ratios: off/baseline {ratios['off_vs_baseline']}"
        f" (< {TARGETS['off_vs_baseline']}), on/off {ratios['on_vs_off']}"
        f" (< {TARGETS['on_vs_off']}); tracing hooks with tracing off"
        f" {hooks['hooks_us_per_step']} us/step ({hooks['share_of_off_step']:.2%} of a step);"
        f" Python calls per step off/baseline {round(calls['off'] / calls['baseline'], 3)};"
        f" commit floor {floor}/s")


if __name__ == "__main__":
    if "--serve" in sys.argv:
        _serve()
    elif "--sink" in sys.argv:
        _sink()
    else:
        main()
