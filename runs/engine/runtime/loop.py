"""run_tick: a worker's turn at one run — claim, load, pre-flight, do units, let go.

A tick does units until the run waits, ends, or its time slice is used up; then it puts the
run back in the queue (the caller re-enqueues it). A run on a slot (runs.slots) keeps it past
its slice while nobody waits for it: its process has a free slot (it keeps taking ticks from
q2), or no run is queued at all. When others are queued and no slot is free, the slice ends.
Every commit carries the version the worker last saw, so if anyone else touched the run the
next write raises LeaseLost and the tick stops without writing.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable

from django.conf import settings

from agentops import clock
from agentops.agents import registry
from agentops.observability.logging import run_log_context
from runs.engine.runtime import telemetry, trace_spans
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.exceptions import run_exceptions_at_end
from runs.engine.runtime.leases import lease_ticked
from runs.engine.runtime.model_turn import PLAN_STEP, model_turn
from runs.engine.runtime.outcomes import block, block_unopened
from runs.engine.runtime.parking import late_results_record
from runs.engine.runtime.queue import run_others_queued
from runs.engine.runtime.selfcheck import session_checked
from runs.engine.runtime.session import RunSession
from runs.engine.runtime.claim_sql import claimed_limits, claimed_state
from runs.engine.runtime.tick_failure import tick_failed
from runs.engine.runtime.tool_phase import tool_phase
from runs.engine.runtime.transition import claim_secrets, run_claim, run_urgent_waiting
from runs.engine.runtime.unit_sql import unit_settled
from runs.engine.runtime.versions import agent_migrate
from runs.engine.runtime.world import world_recheck
from runs.errors import UnknownAgent, UnknownSchemaVersion
from agentops.control import LeaseLost
from runs.event_types import EventType
from runs.models import Run
from runs.slots import draining, on_slot, slots_free
from runs.statuses import RunStatus, StepStatus

_DONE = {StepStatus.SUCCEEDED, StepStatus.SKIPPED}


def run_tick(run_id: object, *, worker: str, slice_s: float | None = None) -> str:
    """Work on a run until it waits, ends or the slice is used; return how the tick ended."""
    with run_log_context(run_id=run_id):
        outcome = _tick(run_id, worker, slice_s)
        telemetry.tick_event("tick ended: %s", outcome, level=logging.DEBUG
                             if outcome == "not_claimed" else logging.INFO)
        return outcome


def _tick(run_id: object, worker: str, slice_s: float | None) -> str:
    # Held before the claim: the first renewal is on time however long this thread waits next.
    with lease_ticked(run_id, worker):
        run = run_claim(run_id=run_id, owner=worker, ttl_s=settings.AGENTOPS_LEASE_TTL_S)
        if run is None:
            return "not_claimed"
        telemetry.tick_event("claimed by %s (version %d)", worker, run.version)
        return _ticked(run, worker, slice_s)


def _ticked(run: Run, worker: str, slice_s: float | None) -> str:
    session = None
    try:
        session = session_open(run, worker)
        if session is None or world_recheck(session):
            return RunStatus.BLOCKED
        trace_spans.tick_began(session)
        deadline = clock.monotonic() + (slice_s or settings.AGENTOPS_TICK_SLICE_S)
        look_at = clock.monotonic() + settings.AGENTOPS_YIELD_CHECK_S
        while not session.stopped:
            now = clock.monotonic()
            if now >= deadline and _keeps_slot():
                deadline = now + (slice_s or settings.AGENTOPS_TICK_SLICE_S)
            if now >= deadline or draining():
                session.commit([], to=RunStatus.QUEUED, reason="slice_ended")
                return "slice_ended"
            if now >= look_at:
                look_at = now + settings.AGENTOPS_YIELD_CHECK_S
                if _overdue_elsewhere(run):
                    session.commit([], to=RunStatus.QUEUED, reason="yielded")
                    return "yielded"
            unit(session)
        unit_settled()  # the outcome is told once every unit of the tick has committed
        return session.outcome
    except LeaseLost:
        unit_settled(quiet=True)  # a unit in flight is this tick's, not the next one's
        if session is not None and session.late():
            late_results_record(session, session.late(), False)  # read results held back
        telemetry.tick_event("lease lost: another writer changed the run", level=logging.WARNING)
        return "lease_lost"
    except Exception as exc:
        unit_settled(quiet=True)
        # Not a lost process: a classified step failure now, never a recovery later.
        return tick_failed(run, worker, session, exc)
    except BaseException:
        unit_settled(quiet=True)
        raise


def _keeps_slot() -> bool:
    """Return True when a run on a slot may go on past its slice: nobody waits for the slot.

    Re-enqueueing every slice through q2 costs a commit, a queue round trip, a claim and a
    state load for nothing when no run is queued.
    """
    if slots_free():
        return True
    return on_slot() and not draining() and not _lately("others_queued", run_others_queued)


def _overdue_elsewhere(run: Run) -> bool:
    """Return True when a recovered run has waited past the grace for a worker."""
    if not settings.AGENTOPS_ENQUEUE_TICKS:
        return False  # ticks driven in process (tests, --inline): nobody else to yield to
    if slots_free():
        return False  # this process still takes ticks from q2: a recovered run gets a slot
    # The asking run is running, never queued: the answer is the same for every run here.
    return _lately("urgent_waiting", lambda: run_urgent_waiting(
        other_than=run.pk, grace_s=settings.AGENTOPS_URGENT_GRACE_S) is not None)


_asked: dict[str, tuple[float, bool]] = {}


def _lately(question: str, ask: Callable[[], bool]) -> bool:
    """Return ``ask()``, asked at most once per AGENTOPS_YIELD_CHECK_S by this process.

    Hundreds of runs in flight in one process would otherwise each ask after every unit.
    The first thread to find the answer stale asks; the others keep the last answer while
    it waits for its own (a query behind a busy pool takes long enough for dozens to ask).
    """
    now = clock.monotonic()
    at, answer = _asked.get(question, (-math.inf, False))
    if not 0 <= now - at < settings.AGENTOPS_YIELD_CHECK_S:  # stale, or another clock (tests)
        _asked[question] = (now, answer)  # taken: the others keep the last answer meanwhile
        answer = ask()
        _asked[question] = (now, answer)
    return answer


def session_open(run: Run, worker: str) -> RunSession | None:
    """Return a session on the claimed run, or None after blocking it (version, schema)."""
    try:
        state = claimed_state(run)
    except UnknownSchemaVersion as exc:
        block_unopened(run, "version_mismatch", exc.message)
        return None
    try:
        agent = registry.get(run.agent_name, run.agent_version)
    except UnknownAgent as exc:
        migrated = agent_migrate(run, state)
        if migrated is not None:
            agent, state = migrated
            return session_checked(RunSession(run=run, state=state, agent=agent, worker=worker,
                                              tool_limits=claimed_limits(run),
                                              last_snapshot_size=0,
                                              secrets=claim_secrets(run)),
                                   migrated=True)
        if exc.details.get("broken_modules"):
            # Its module may be the one that failed: say so at once, never "not deployed".
            block_unopened(run, "internal_error", exc.message, state=state)
            return None
        try:
            latest = registry.get(run.agent_name).version
        except UnknownAgent:
            latest = "none"
        block_unopened(run, "version_mismatch",
                        f"run is pinned to {run.agent_name}@{run.agent_version}, which is not "
                        f"deployed here (deployed: {latest}); deploy it or register a migrator",
                        state=state)
        return None
    return session_checked(RunSession(run=run, state=state, agent=agent, worker=worker,
                                      tool_limits=claimed_limits(run),
                                      last_snapshot_size=0,
                                              secrets=claim_secrets(run)))


def unit(session: RunSession) -> None:
    """Do one unit of work: a tool phase, a model turn, or a step/run transition."""
    s = session.state
    if not s["plan"]:
        _ensure_step(session, PLAN_STEP)
        model_turn(session, PLAN_STEP)
        return
    step = s["current_step"] if s["current_step"] and s["current_step"] != PLAN_STEP else None
    step = step or _next_step(s)
    if step is None:
        _finish_run(session)
        return
    if s["steps"][step]["status"] != StepStatus.RUNNING:
        session.commit([NewEvent(EventType.STEP_STARTED, {"step": step}),
                        NewEvent(EventType.MODEL_REQUESTED, {"step": step, "turn": s["turn"] + 1})])
        return
    open_ids = [cid for cid, c in s["open_calls"].items() if c["step"] == step]
    with run_log_context(step=step):
        if open_ids:
            tool_phase(session, step, open_ids)
        else:
            model_turn(session, step)


def _ensure_step(session: RunSession, step: str) -> None:
    if session.state["current_step"] != step:
        session.commit([NewEvent(EventType.STEP_STARTED, {"step": step}),
                        NewEvent(EventType.MODEL_REQUESTED, {"step": step, "turn": session.state["turn"] + 1})])


def _next_step(s: dict) -> str | None:
    for plan_step in s["plan"]:
        st = s["steps"][plan_step["key"]]
        if st["status"] in _DONE:
            continue
        if all(s["steps"][d]["status"] in _DONE for d in plan_step["depends_on"]):
            return plan_step["key"]
    return None


def _finish_run(session: RunSession) -> None:
    s = session.state
    left = [k for k, st in s["steps"].items() if st["status"] not in _DONE]
    if left:
        block(session, "stall", f"steps {', '.join(left)} cannot start: their dependencies "
                                "did not complete")
        return
    exceptions = run_exceptions_at_end(session.run.pk, s)
    if exceptions:
        # Its work is done but not all of it as planned: never shown as a clean success.
        session.commit([NewEvent(EventType.RUN_COMPLETED, {"steps": len(s["plan"]),
                                                   "exceptions": len(exceptions)})],
                       to=RunStatus.COMPLETED_WITH_EXCEPTIONS,
                       reason="completed_with_exceptions",
                       detail=f"{len(exceptions)} exception(s): "
                              + "; ".join(e["kind"] for e in exceptions)[:400],
                       fields={"exceptions": exceptions})
        return
    session.commit([NewEvent(EventType.RUN_COMPLETED, {"steps": len(s["plan"])})],
                   to=RunStatus.SUCCEEDED)
