"""django-q2 entry points: take a run id, call the engine, re-enqueue when the slice ended."""
from __future__ import annotations

import time

from django.conf import settings

from runs.engine.runtime.loop import run_tick
from runs.engine.runtime.queue import enqueue_tick, worker_name
from runs.engine.runtime.recovery import runs_recovered_reserve
from runs.engine.runtime.transition import run_urgent_waiting
from runs.handoff import handoff_watch
from runs.hung_threads import hung_guard_install, hung_replacing
from runs.slots import (in_flight, runs_in_flight_limit, slot_submit, slot_wait_free,
                        slots_free)


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
        handoff_watch(recovered_start)  # the host's recoverer wakes it (runs.handoff)
        _recovered_take(other_than=run_id)
        slot_wait_free()
        return "in_slot"
    return tick_run(run_id)


_TAKE_AT_ONCE = 8  # recovered runs one q2 task may start: the other hosts take their share
_looked = {"at": -1.0}


def _recovered_take(*, other_than: str) -> None:
    """Start recovered runs still queued on this process's free slots now, not through q2.

    A dead worker's runs are recovered together and their ticks queue one behind the other
    in q2 (one task per fetch, runs.engine.runtime.queue); the first of them (or any tick)
    to reach a process with free slots brings a few others along, reserved so that no other
    process starts them too (runs_recovered_reserve). Their own ticks find them claimed later
    (``not_claimed``: one conditional UPDATE matching nothing). Looked at most once per
    AGENTOPS_YIELD_CHECK_S by a process: one probe of the partial index on urgent queued
    runs, almost always empty.
    """
    now = time.monotonic()
    if now - _looked["at"] < settings.AGENTOPS_YIELD_CHECK_S or not slots_free():
        return
    _looked["at"] = now
    recovered_start(spare=1, other_than=other_than)


def recovered_start(*, spare: int = 0, other_than: str = "") -> None:
    """Reserve up to 8 recovered runs for this process's free slots (``spare`` of them left
    free) and start them there; the host's recoverer calls for it too (runs.handoff)."""
    if not slots_free():
        return
    free = runs_in_flight_limit() - in_flight()
    for other in runs_recovered_reserve(limit=max(0, min(free - spare, _TAKE_AT_ONCE))):
        if str(other) != other_than:
            slot_submit(str(other), tick_run)


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
