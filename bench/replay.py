"""Replay: how fast a run's whole log becomes its state (reducer.fold), for the 10k-event run.

Figures: fold_events_per_s (the target, pure reduce over events already in memory),
load_ms (reading the 10k events from PostgreSQL), replay_events_per_s (load + fold, what
replay_state costs), state_bytes (the canonical JSON of the final state).

    BENCH_SCALE=0.01 .venv/bin/python bench/replay.py
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import bench_scale, django_boot, emit, log, percentiles

ROUNDS = 15
WARMUPS = 2


def _timed(fn, rounds: int) -> tuple[list[float], object]:
    """Call ``fn`` ``rounds`` times after the warm-ups; return the times in ms and its result."""
    result = None
    for _ in range(WARMUPS):
        result = fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - start) * 1000)
    return times, result


def measure(run_id: object) -> dict[str, object]:
    """Return the replay figures for the run ``run_id``."""
    from runs.engine.core import reducer
    from runs.engine.runtime.events import event_tail
    from agentops.jsonstate import canonical_json
    from runs.engine.runtime.snapshots import replay_state

    events = event_tail(run_id, 0)
    n = len(events)
    fold_ms, state = _timed(lambda: reducer.fold(reducer.empty_state(), events), ROUNDS)
    load_ms, _ = _timed(lambda: event_tail(run_id, 0), 5)
    replay_ms, replayed = _timed(lambda: replay_state(run_id), 5)
    if replayed != state:
        raise RuntimeError("replay_state and fold disagree on the same log")
    fold = percentiles(fold_ms)
    replay = percentiles(replay_ms)
    return {
        "events": n,
        "fold_ms": fold,
        "fold_events_per_s": round(n / (fold["p50"] / 1000)),
        "load_ms": percentiles(load_ms),
        "replay_ms": replay,
        "replay_events_per_s": round(n / (replay["p50"] / 1000)),
        "state_bytes": len(canonical_json(state).encode()),
        "final_status": state["status"],
    }


def main() -> None:
    """Seed if needed, replay the 10k-event run and print one JSON line."""
    django_boot()
    from bench.seed import seed

    summary = seed(scale=bench_scale())
    log(f"replay: seed {'found' if summary['skipped'] else 'written'}; run {summary['big_run_id']}")
    emit("replay", {"run_id": summary["big_run_id"], **measure(summary["big_run_id"])})


if __name__ == "__main__":
    main()
