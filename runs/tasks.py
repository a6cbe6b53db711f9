"""django-q2 entry points: take a run id, call the engine, re-enqueue when the slice ended."""
from __future__ import annotations

import os
import socket
from typing import Any

from django.conf import settings


def worker_name() -> str:
    """Return this process's worker name (host:pid), used as the lease owner."""
    return f"{socket.gethostname()}:{os.getpid()}"


def tick(run_id: str) -> str:
    """Hand a run to a free run slot of this process (a q2 task); see runs.slots.

    Blocks while every slot is busy (back-pressure). With one run in flight (SQLite's
    default) the tick runs here, in the q2 task, as before.
    """
    from runs.slots import slot_submit

    if slot_submit(run_id, tick_run):
        return "in_slot"
    return tick_run(run_id)


def tick_run(run_id: str) -> str:
    """Run one tick of a run on this worker and re-enqueue it when its slice ended.

    A tick that yielded to a recovered run takes that run here and now: the q2 queue may
    hold it behind many others, or in a dead worker's prefetch.
    """
    from runs.engine.runtime.loop import run_tick
    from runs.engine.runtime.transition import run_urgent_waiting

    outcome = run_tick(run_id, worker=worker_name())
    if outcome in ("slice_ended", "yielded"):
        enqueue_tick(run_id)
    if outcome == "yielded":
        urgent = run_urgent_waiting(other_than=run_id, grace_s=0)
        if urgent is not None:
            taken = run_tick(urgent, worker=worker_name())
            if taken in ("slice_ended", "yielded"):
                enqueue_tick(urgent)
    return outcome


def enqueue_tick(run_id: Any) -> None:
    """Put a tick of ``run_id`` on the q2 queue (unless AGENTOPS_ENQUEUE_TICKS is off)."""
    if not settings.AGENTOPS_ENQUEUE_TICKS:
        return
    from django_q.tasks import async_task

    async_task("runs.tasks.tick", str(run_id), task_name=f"tick:{run_id}")
