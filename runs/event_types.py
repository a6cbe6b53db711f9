"""Every event type a run's log may hold, and whether the reducer folds it into the state.

An event type is either REDUCED (runs.engine.core.reducer has a handler that changes the state)
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
    PLAN_EDITED = "plan.edited"  # a person changed the steps not done yet
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
    CHILDREN_ENDED = "children.ended"  # child runs ended without doing all their work
    # What child runs spent of the shares they got: charged to the parent (the rest returns).
    CHILDREN_SPENT = "children.spent"
    SIGNAL_RECEIVED = "signal.received"
    CONTEXT_COMPACTED = "context.compacted"
    APPROVAL_DECIDED = "approval.decided"
    APPROVAL_EXPIRED = "approval.expired"
    APPROVAL_STALE = "approval.stale"
    APPROVAL_VOTED = "approval.voted"
    GUARD_DRIFT_SCORED = "guard.drift_scored"
    GUARD_SELF_CHECKED = "guard.self_checked"
    GUARD_SELF_CHECK_FAILED = "guard.self_check_failed"
    RESOURCE_VERSION = "resource.version"  # a tool's version probe, when the run first used it
    WORLD_CHANGED = "world.changed"  # a re-check before resuming found the world changed
    WORLD_CHECKED = "world.checked"  # ... and found it unchanged


E = EventType
# What the console shows for each type (``{{ e.type|label:"event" }}``); every type has one
# (tests/runs/test_console_round2.py checks).
EVENT_LABELS: dict[str, str] = {
    E.RUN_CREATED: "Run created", E.RUN_STATUS: "Status changed",
    E.RUN_RECOVERED: "Recovered after a worker loss", E.RUN_IMPORTED: "Imported",
    E.RUN_MIGRATED: "Migrated to a new agent version", E.RUN_NOTE: "Note",
    E.RUN_ROLLED_BACK: "Rolled back", E.RUN_RESUMED: "Resumed",
    E.RUN_BUDGET_RAISED: "Budget raised", E.RUN_CANCELLED: "Cancelled",
    E.RUN_COMPLETED: "Completed", E.RUN_FORKED: "Forked",
    E.RUN_FINISHED_PARTIAL: "Finished with partial results",
    E.PLAN_ACCEPTED: "Plan accepted", E.PLAN_EDITED: "Plan edited by a person",
    E.STEP_STARTED: "Step started",
    E.STEP_COMPLETED: "Step completed", E.STEP_FAILED: "Step failed",
    E.STEP_RETRYING: "Step retrying", E.STEP_SKIPPED: "Step skipped",
    E.STEP_RESET: "Step reset", E.STEP_INCOMPLETE: "Step not completed",
    E.MODEL_REQUESTED: "Model asked", E.MODEL_REPLIED: "Model replied",
    E.MODEL_FAILED: "Model call failed", E.TOOL_STARTED: "Tool call started",
    E.TOOL_RESULT: "Tool result", E.TOOL_UNKNOWN: "Tool outcome unknown",
    E.TOOL_ATTEMPT_FAILED: "Tool attempt failed", E.TOOL_LATE_RESULT: "Late tool result",
    E.TOOL_REOPENED: "Tool call reopened", E.TOOL_CONFIRMED: "Tool outcome confirmed",
    E.TOOL_COMPENSATED: "Tool call undone", E.TOOL_COMPENSATION_FAILED: "Undo failed",
    E.WAIT_STARTED: "Wait started", E.WAIT_ENDED: "Wait ended",
    E.CHILDREN_ENDED: "Child runs ended with exceptions",
    E.CHILDREN_SPENT: "Child runs' budget settled",
    E.SIGNAL_RECEIVED: "Signal received", E.CONTEXT_COMPACTED: "Context compacted",
    E.APPROVAL_DECIDED: "Approval decided", E.APPROVAL_EXPIRED: "Approval expired",
    E.APPROVAL_STALE: "Approval went stale",
    E.APPROVAL_VOTED: "Approved by one of several", E.GUARD_DRIFT_SCORED: "Drift scored",
    E.GUARD_SELF_CHECKED: "Self-check passed", E.GUARD_SELF_CHECK_FAILED: "Self-check failed",
    E.RESOURCE_VERSION: "Resource version seen",
    E.WORLD_CHANGED: "The world changed while it waited",
    E.WORLD_CHECKED: "World re-checked: unchanged",
}
# Facts for people: the state is already right without them (the change they report comes
# with a reduced event, e.g. run.cancelled with run.status, tool.compensated with the ledger).
AUDIT_ONLY = frozenset({
    E.RUN_RESUMED, E.RUN_BUDGET_RAISED, E.RUN_CANCELLED, E.RUN_COMPLETED, E.RUN_FORKED,
    E.TOOL_STARTED, E.TOOL_LATE_RESULT,
    E.TOOL_COMPENSATION_FAILED, E.APPROVAL_EXPIRED, E.APPROVAL_STALE,
    E.APPROVAL_VOTED, E.GUARD_SELF_CHECK_FAILED,
})
REDUCED = frozenset(EventType) - AUDIT_ONLY
_KNOWN = frozenset(EventType.values)


def is_known(type_: str) -> bool:
    """Return True when ``type_`` is a declared event type."""
    return type_ in _KNOWN
