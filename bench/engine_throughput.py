"""engine_throughput: durable no-op steps/s with 1 and 2 workers on PostgreSQL.

A step is one model turn that asks for one no-op tool plus that tool call, recorded durably.
N runs x S steps; the 1-worker pass ticks every run in this process, the 2-worker pass splits
the runs over two processes. Also: p50/p99 per step, commits, rows and WAL bytes per step,
peak worker memory.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import engine_env  # noqa: E402

engine_env(in_process=True)

from bench._common import django_boot, emit, log, peak_rss_mb, percentiles, pg_counters, pg_delta  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "20"))
STEPS = int(os.environ.get("BENCH_STEPS", "50"))


def _start(n: int) -> list[str]:
    from runs.services import run_start

    return [str(run_start(agent="bench-noop", goal="noop", input={"steps": STEPS}).pk)
            for _ in range(n)]


def _tick_all(run_ids: list[str], worker: str) -> list[float]:
    """Tick each run to the end; return the time of each unit (one step each)."""
    from runs.engine import loop

    unit_times: list[float] = []
    real_unit = loop.unit

    def timed(session):
        t = time.perf_counter()
        real_unit(session)
        unit_times.append(time.perf_counter() - t)

    loop.unit = timed
    for run_id in run_ids:
        assert loop.run_tick(run_id, worker=worker) == "succeeded"
    loop.unit = real_unit
    return unit_times


def _rows() -> int:
    from ledger.models import ToolAttempt, ToolCall
    from runs.models import Event, Snapshot

    return sum(m.objects.count() for m in (Event, Snapshot, ToolCall, ToolAttempt))


def _one_worker() -> dict:
    ids = _start(RUNS)
    rows0, pg0 = _rows(), pg_counters()
    t = time.perf_counter()
    units = _tick_all(ids, "bench-1")
    elapsed = time.perf_counter() - t
    delta = pg_delta(pg0)
    steps = RUNS * STEPS
    return {
        "steps": steps,
        "steps_per_s": round(steps / elapsed, 1),
        "unit_ms": percentiles([u * 1000 for u in units]),
        "commits_per_step": round(delta["commits"] / steps, 2),
        "rows_per_step": round((_rows() - rows0) / steps, 2),
        "wal_bytes_per_step": round(delta["wal_bytes"] / steps),
    }


def _two_workers() -> dict:
    ids = _start(RUNS * 2)
    halves = [ids[: RUNS], ids[RUNS:]]
    with tempfile.TemporaryDirectory() as barrier:
        env = {**os.environ, "BENCH_BARRIER": barrier}
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(h)],
                                  stdout=subprocess.PIPE, text=True, env=env) for h in halves]
        outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    # Each worker reports when its ticking started and ended (wall clock), so the two
    # processes' start-up (Django boot, imports) is not counted as engine time.
    elapsed = max(o["end"] for o in outs) - min(o["start"] for o in outs)
    steps = RUNS * 2 * STEPS
    return {"steps": steps, "steps_per_s": round(steps / elapsed, 1),
            "worker_peak_rss_mb": max(o["peak_rss_mb"] for o in outs)}


def _worker(ids: list[str]) -> None:
    django_boot(migrate=False)
    from django.db import connection

    connection.ensure_connection()
    _barrier(ids)
    start = time.time()
    _tick_all(ids, f"bench-{os.getpid()}")
    print(json.dumps({"peak_rss_mb": peak_rss_mb(), "start": start, "end": time.time()}))


def _barrier(ids: list[str]) -> None:
    """Wait until both workers are booted (each leaves a mark), so they tick at the same time."""
    mark = Path(os.environ["BENCH_BARRIER"])
    (mark / ids[0]).touch()
    deadline = time.time() + 60
    while len(list(mark.iterdir())) < 2 and time.time() < deadline:
        time.sleep(0.01)


def _floor(n: int = 500) -> float:
    """Return raw psycopg commits/s (one INSERT + COMMIT), the floor measured in this run."""
    import psycopg
    from django.db import connection

    params = connection.get_connection_params()
    with psycopg.connect(**{k: v for k, v in params.items() if k != "cursor_factory"}) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (x int)")
        conn.commit()
        t = time.perf_counter()
        for i in range(n):
            conn.execute("INSERT INTO bench_floor VALUES (%s)", [i])
            conn.commit()
        elapsed = time.perf_counter() - t
        conn.execute("DROP TABLE bench_floor")
        conn.commit()
    return n / elapsed


def main() -> None:
    django_boot()
    log(f"engine_throughput: {RUNS} runs x {STEPS} steps")
    _tick_all(_start(2), "warmup")
    floor_before = _floor()
    one = _one_worker()
    floor = (floor_before + _floor()) / 2
    log(f"1 worker: {one['steps_per_s']} steps/s")
    two = _two_workers()
    log(f"2 workers: {two['steps_per_s']} steps/s")
    emit("engine_throughput", {
        **one,
        "two_workers": two,
        "scaling_2_vs_1": round(two["steps_per_s"] / one["steps_per_s"], 2),
        "floor_commits_per_s": round(floor, 1),
        "dbos_steps_per_s": 582,
        "ratio_vs_dbos": round(one["steps_per_s"] / 582, 2),
        # DBOS did 582 steps/s where the floor was 3,048 commits/s (0.19 of the floor); on a
        # loaded machine compare shares of the floor measured in this same run.
        "ratio_vs_dbos_normalised": round((one["steps_per_s"] / floor) / (582 / 3048), 2),
    })


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        _worker(json.loads(sys.argv[2]))
    else:
        main()
