"""Every event type a run's log may hold, and whether the reducer folds it into the state.

An event type is either REDUCED (runs.engine.reducer has a handler that changes the state)
or AUDIT_ONLY (a fact for people and the console: it never changes what the engine does).
``NewEvent`` refuses a type that is not here, so a new type cannot be emitted before it is
declared; tests/runs/test_event_types.py walks this table against the reducer's handlers.
The console's event filter lists ``EventType.values``.
"""
from __future__ import annotations

from django.db import models


class EventType(models.TextChoices):
    """The type of one fact in a run's log."""

    RUN_CREATED = "run.created"
    RUN_STATUS = "run.status"
    RUN_RECOVERED = "run.recovered"
    RUN_IMPORTED = "run.imported"
    RUN_MIGRATED = "run.migrated"
    RUN_NOTE = "run.note"  # free text (an agent migrator may write one)
    RUN_ROLLED_BACK = "run.rolled_back"
    RUN_RESUMED = "run.resumed"
    RUN_BUDGET_RAISED = "run.budget_raised"
    RUN_CANCELLED = "run.cancelled"
    RUN_COMPLETED = "run.completed"
    RUN_FORKED = "run.forked"
    RUN_FINISHED_PARTIAL = "run.finished_partial"  # an operator ended it with partial results
    PLAN_ACCEPTED = "plan.accepted"
    STEP_STARTED = "step.started"
    STEP_COMPLETED = "step.completed"
    STEP_FAILED = "step.failed"
    STEP_RETRYING = "step.retrying"
    STEP_SKIPPED = "step.skipped"
    STEP_RESET = "step.reset"
    STEP_INCOMPLETE = "step.incomplete"  # the model stopped before the step's completion
    MODEL_REQUESTED = "model.requested"
    MODEL_REPLIED = "model.replied"
    MODEL_FAILED = "model.failed"
    TOOL_STARTED = "tool.started"
    TOOL_RESULT = "tool.result"
    TOOL_UNKNOWN = "tool.unknown"
    TOOL_ATTEMPT_FAILED = "tool.attempt_failed"
    TOOL_LATE_RESULT = "tool.late_result"
    TOOL_REOPENED = "tool.reopened"
    TOOL_CONFIRMED = "tool.confirmed"
    TOOL_COMPENSATED = "tool.compensated"
    TOOL_COMPENSATION_FAILED = "tool.compensation_failed"
    WAIT_STARTED = "wait.started"
    WAIT_ENDED = "wait.ended"
    SIGNAL_RECEIVED = "signal.received"
    CONTEXT_COMPACTED = "context.compacted"
    APPROVAL_DECIDED = "approval.decided"
    APPROVAL_EXPIRED = "approval.expired"
    APPROVAL_STALE = "approval.stale"
    GUARD_DRIFT_SCORED = "guard.drift_scored"
    GUARD_SELF_CHECKED = "guard.self_checked"
    GUARD_SELF_CHECK_FAILED = "guard.self_check_failed"


E = EventType
# Facts for people: the state is already right without them (the change they report comes
# with a reduced event, e.g. run.cancelled with run.status, tool.compensated with the ledger).
AUDIT_ONLY = frozenset({
    E.RUN_RESUMED, E.RUN_BUDGET_RAISED, E.RUN_CANCELLED, E.RUN_COMPLETED, E.RUN_FORKED,
    E.TOOL_STARTED, E.TOOL_ATTEMPT_FAILED, E.TOOL_LATE_RESULT,
    E.TOOL_COMPENSATION_FAILED, E.APPROVAL_EXPIRED, E.APPROVAL_STALE,
    E.GUARD_SELF_CHECK_FAILED,
})
REDUCED = frozenset(EventType) - AUDIT_ONLY
_KNOWN = frozenset(EventType.values)


def is_known(type_: str) -> bool:
    """Return True when ``type_`` is a declared event type."""
    return type_ in _KNOWN
