"""history_growth: one run of 200 steps with 500-byte messages; cost per step early vs late.

Per step (one model turn + its tool call): server time and WAL bytes written. The ratio of
the median around step 200 to the median around step 10 shows whether a step's cost grows
with history (LangGraph's grows 3.6x: it rewrites the whole state every step).
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import engine_env

engine_env(in_process=True)

from bench._common import django_boot, emit, log, median  # noqa: E402

STEPS = int(os.environ.get("BENCH_STEPS", "200"))


def _wal(cursor) -> int:
    cursor.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
    return int(cursor.fetchone()[0])


def main() -> None:
    django_boot()
    from django.db import connection

    from runs.engine.runtime import loop
    from runs.services import run_start

    run = run_start(agent="bench-chatty", goal="chat", input={"steps": STEPS})
    per_step: list[tuple[float, int]] = []
    real_unit = loop.unit
    cursor = connection.cursor()

    def measured(session):
        before_turns = session.state["usage"]["tool_calls"]
        wal0, t = _wal(cursor), time.perf_counter()
        real_unit(session)
        elapsed, wal = time.perf_counter() - t, _wal(cursor) - wal0
        if session.state["usage"]["tool_calls"] > before_turns:
            per_step.append((elapsed * 1000, wal))
        elif per_step:  # a unit that did no step (compaction, start): charge it to the step
            ms, b = per_step[-1]
            per_step[-1] = (ms + elapsed * 1000, b + wal)

    loop.unit = measured
    log(f"history_growth: 1 run x {STEPS} steps, 500-byte messages")
    assert loop.run_tick(run.pk, worker="bench") == "succeeded"
    loop.unit = real_unit
    early, late = per_step[5:15], per_step[-10:]
    ms_early, ms_late = median([m for m, _ in early]), median([m for m, _ in late])
    b_early, b_late = median([b for _, b in early]), median([b for _, b in late])
    mean_early = sum(b for _, b in per_step[:50]) / 50
    mean_late = sum(b for _, b in per_step[-50:]) / 50
    emit("history_growth", {
        "steps": len(per_step),
        "ms_per_step_at_10": round(ms_early, 3),
        "ms_per_step_at_200": round(ms_late, 3),
        "latency_ratio": round(ms_late / ms_early, 2),
        "wal_bytes_per_step_at_10": b_early,
        "wal_bytes_per_step_at_200": b_late,
        "bytes_ratio": round(b_late / b_early, 2),
        "mean_wal_bytes_first_50": round(mean_early),
        "mean_wal_bytes_last_50": round(mean_late),
        "amortised_bytes_ratio": round(mean_late / mean_early, 2),
        "langgraph_latency_ratio": 3.6,
    })


if __name__ == "__main__":
    main()
