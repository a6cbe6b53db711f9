"""django-q2 entry points: take a run id, call the engine, re-enqueue when the slice ended."""
from __future__ import annotations

import time

from runs.engine.runtime.loop import run_tick
from runs.engine.runtime.queue import enqueue_tick, worker_name
from runs.engine.runtime.transition import run_urgent_waiting
from runs.hung_threads import hung_guard_install, hung_replacing
from runs.slots import slot_submit, slot_wait_free


def tick(run_id: str) -> str:
    """Hand a run to a free run slot of this process (a q2 task); see runs.slots.

    Returns once a slot is free again (back-pressure): a process whose slots are all busy
    takes no further tick from q2, so the next one goes to a process or host that can start
    it now. With one run in flight (SQLite's default) the tick runs here, in the q2 task.
    """
    hung_guard_install()
    if hung_replacing():
        # This process is being replaced (hung tool threads): the run goes to another.
        time.sleep(0.2)  # not straight back to this process's own q2 fetch
        enqueue_tick(run_id)
        return "handed_back"
    if slot_submit(run_id, tick_run):
        slot_wait_free()
        return "in_slot"
    return tick_run(run_id)


def tick_run(run_id: str) -> str:
    """Run one tick of a run on this worker and re-enqueue it when its slice ended.

    A tick that yielded to a recovered run takes that run here and now: the q2 queue may
    hold it behind many others, or in a dead worker's prefetch.
    """
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
