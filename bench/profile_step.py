"""profile_step: CPU per model step of the density workload, in one process, under cProfile.

Not a benchmark of record: a developer's tool. N runs (BENCH_RUNS, 20) of S tool steps
(BENCH_STEPS, 20) of the ``bench-remote`` agent against a local bench.model_server answering
after BENCH_DELAY_S (0: at once), ticked one after the other in this process. Prints CPU ms
per model call without the profiler, then (unless BENCH_PROFILE=0) with it, and the top
functions (BENCH_PROFILE_TOP, 40) by own time. A model slower than AGENTOPS_READ_RIDE_MS
takes the host's path: each step's read results commit in a unit of their own.
"""
from __future__ import annotations

import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import engine_env
from bench.model_server import model_env, model_server_start

engine_env(in_process=True)

from bench._common import django_boot, log  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "20"))
DELAY_S = float(os.environ.get("BENCH_DELAY_S", "0"))  # the model's latency: 0 answers at once
STEPS = int(os.environ.get("BENCH_STEPS", "20"))


def _pass(profile: cProfile.Profile | None) -> float:
    from runs.engine.runtime import loop
    from runs.services import run_start

    tag = os.urandom(4).hex()
    ids = [run_start(agent="bench-remote", goal=f"p {tag} {i}", input={}).pk
           for i in range(RUNS)]
    cpu = time.process_time()
    if profile:
        profile.enable()
    for pk in ids:
        assert loop.run_tick(pk, worker="prof") == "succeeded"
    if profile:
        profile.disable()
    return (time.process_time() - cpu) * 1000 / (RUNS * (STEPS + 1))


def main() -> None:
    server, url = model_server_start(DELAY_S, STEPS)
    os.environ.update(model_env(url))
    try:
        django_boot()
        _pass(None)  # warm
        log(f"cpu ms per model call, unprofiled: {_pass(None):.3f}")
        if os.environ.get("BENCH_PROFILE", "1") == "0":
            return
        prof = cProfile.Profile(time.process_time)
        log(f"cpu ms per model call, profiled: {_pass(prof):.3f}")
        stats = pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime")
        stats.print_stats(int(os.environ.get("BENCH_PROFILE_TOP", "40")))
        stats.sort_stats("cumulative").print_stats(int(os.environ.get("BENCH_PROFILE_TOP", "40")))
    finally:
        server.kill()


if __name__ == "__main__":
    main()
