"""profile_step: CPU per model step of the density workload, in one process, under cProfile.

Not a benchmark of record: a developer's tool. N runs (BENCH_RUNS, 20) of S tool steps
(BENCH_STEPS, 20) of the ``bench-remote`` agent against a local bench.model_server answering
after BENCH_DELAY_S (0: at once), ticked one after the other in this process, or by
BENCH_THREADS threads at once (1). Prints CPU ms per model call without the profiler, then
(unless BENCH_PROFILE=0) with it, and the top functions (BENCH_PROFILE_TOP, 40) by own time.
A model slower than AGENTOPS_READ_RIDE_MS takes the host's path: each step's read results
commit in a unit of their own.

With a slow model, the same calls cost more CPU the fewer run at once in the process: with
one, the process waits idle between two steps (bench/results.md, "CPU a step and how busy
the process is").
"""
from __future__ import annotations

import cProfile
import os
import pstats
import sys
import threading
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
THREADS = int(os.environ.get("BENCH_THREADS", "1"))


def _pass(profile: cProfile.Profile | None) -> float:
    from runs.services import run_start

    tag = os.urandom(4).hex()
    ids = [run_start(agent="bench-remote", goal=f"p {tag} {i}", input={}).pk
           for i in range(RUNS)]
    cpu = time.process_time()
    if profile:
        profile.enable()
    if THREADS == 1:
        _tick_all(ids)
    else:
        parts = [threading.Thread(target=_tick_all, args=(ids[i::THREADS],))
                 for i in range(THREADS)]
        for part in parts:
            part.start()
        for part in parts:
            part.join()
    if profile:
        profile.disable()
    return (time.process_time() - cpu) * 1000 / (RUNS * (STEPS + 1))


def _tick_all(ids: list) -> None:
    from django.db import connection

    from runs.engine.runtime import loop

    for pk in ids:
        assert loop.run_tick(pk, worker="prof") == "succeeded"
    if threading.current_thread() is not threading.main_thread():
        connection.close()


def main() -> None:
    server, url = model_server_start(DELAY_S, STEPS)
    os.environ.update(model_env(url))
    try:
        django_boot()
        _pass(None)  # warm
        log(f"cpu ms per model call, unprofiled ({THREADS} at once): {_pass(None):.3f}")
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
