"""Run and step statuses, their named sets, and the legal transitions as data."""
from __future__ import annotations

from django.db import models


class RunStatus(models.TextChoices):
    """Where a run is in its life."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    BLOCKED = "blocked"
    UNKNOWN = "unknown"
    SUCCEEDED = "succeeded"
    # Ended, but not cleanly: steps skipped, approvals rejected, writes undone, outcomes an
    # operator supplied... the run's ``exceptions`` list says what, who, when and why.
    COMPLETED_WITH_EXCEPTIONS = "completed_with_exceptions"
    FAILED = "failed"
    CANCELLED = "cancelled"


class BlockReason(models.TextChoices):
    """Why a blocked run needs an operator."""

    RETRY_EXHAUSTED = "retry_exhausted"
    PERMANENT_ERROR = "permanent_error"
    LOOP_DETECTED = "loop_detected"
    STALLED = "stalled"
    BUDGET_EXHAUSTED = "budget_exhausted"
    CIRCUIT_OPEN = "circuit_open"
    RECOVERY_LIMIT = "recovery_limit"
    VERSION_MISMATCH = "version_mismatch"
    INVALID_OUTPUT = "invalid_output"
    DRIFT = "drift"
    APPROVAL_EXPIRED = "approval_expired"
    SELF_CHECK_FAILED = "self_check_failed"
    INCOMPLETE_STEP = "incomplete_step"
    ROLLED_BACK = "rolled_back"  # an operator rolled it back and holds it at the checkpoint
    # A failure escaped a tick without losing its process (runs.engine.runtime.tick_failure).
    CONFIG_ERROR = "config_error"
    INTERNAL_ERROR = "internal_error"
    MODEL_REFUSED = "model_refused"
    # Re-checked before resuming (runs.engine.runtime.world): the requester lost the right to
    # run it, or a resource it uses answers at another version than it first saw.
    WORLD_CHANGED = "world_changed"
    # Failed attempts across all its steps reached the run's failure budget.
    FAILURE_BUDGET = "failure_budget"
    MEMORY_BUDGET = "memory_budget"  # a tool result would outgrow the run's memory share


class WaitKind(models.TextChoices):
    """What a waiting run waits for."""

    APPROVAL = "approval"
    TIMER = "timer"
    SIGNAL = "signal"
    CHILDREN = "children"


class StepStatus(models.TextChoices):
    """Where a plan step is."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    BLOCKED = "blocked"
    CANCELLED = "cancelled"


# A run that stopped on a write whose outcome nobody knows is UNKNOWN with this reason.
UNKNOWN_OUTCOME = "unknown_outcome"

# What the console shows for each value (``{{ value|label:"run" }}``, runs/templatetags):
# one table per enum, next to it, so every page says the same words.
RUN_STATUS_LABELS: dict[str, str] = {
    RunStatus.QUEUED: "queued", RunStatus.RUNNING: "running", RunStatus.WAITING: "waiting",
    RunStatus.BLOCKED: "blocked", RunStatus.UNKNOWN: "outcome unknown",
    RunStatus.SUCCEEDED: "succeeded",
    RunStatus.COMPLETED_WITH_EXCEPTIONS: "completed with exceptions",
    RunStatus.FAILED: "failed", RunStatus.CANCELLED: "cancelled",
}
REASON_LABELS: dict[str, str] = {
    BlockReason.RETRY_EXHAUSTED: "Retries used up",
    BlockReason.PERMANENT_ERROR: "Permanent error",
    BlockReason.LOOP_DETECTED: "Loop detected",
    BlockReason.STALLED: "Stalled: no progress",
    BlockReason.BUDGET_EXHAUSTED: "Budget used up",
    BlockReason.CIRCUIT_OPEN: "Circuit breaker open",
    BlockReason.RECOVERY_LIMIT: "Recovered too many times",
    BlockReason.VERSION_MISMATCH: "Agent version changed",
    BlockReason.INVALID_OUTPUT: "Invalid model output",
    BlockReason.DRIFT: "Drifted from the goal",
    BlockReason.APPROVAL_EXPIRED: "Approval expired",
    BlockReason.SELF_CHECK_FAILED: "Self-check failed",
    BlockReason.INCOMPLETE_STEP: "Step not completed",
    BlockReason.ROLLED_BACK: "Rolled back: waits for a person",
    BlockReason.CONFIG_ERROR: "Configuration error",
    BlockReason.INTERNAL_ERROR: "Unexpected error",
    BlockReason.MODEL_REFUSED: "The model refused",
    BlockReason.WORLD_CHANGED: "The world changed while this run waited",
    BlockReason.FAILURE_BUDGET: "Too many failures in this run",
    BlockReason.MEMORY_BUDGET: "Memory budget reached",
    UNKNOWN_OUTCOME: "Outcome of a write unknown",
}
WAIT_LABELS: dict[str, str] = {
    WaitKind.APPROVAL: "an approval", WaitKind.TIMER: "a timer", WaitKind.SIGNAL: "a signal",
    WaitKind.CHILDREN: "child runs",
}

TERMINAL = frozenset({RunStatus.SUCCEEDED, RunStatus.COMPLETED_WITH_EXCEPTIONS,
                      RunStatus.FAILED, RunStatus.CANCELLED})
# Ended having done its work; only SUCCEEDED did all of it with nothing to report.
COMPLETED = frozenset({RunStatus.SUCCEEDED, RunStatus.COMPLETED_WITH_EXCEPTIONS})
ATTENTION = frozenset({RunStatus.WAITING, RunStatus.BLOCKED, RunStatus.UNKNOWN})
RUNNABLE = frozenset({RunStatus.QUEUED, RunStatus.RUNNING})
# Stopped until a person decides (the console's decide-and-next walks these, oldest first).
STUCK = frozenset({RunStatus.BLOCKED, RunStatus.UNKNOWN})
STEP_DONE = frozenset({StepStatus.SUCCEEDED, StepStatus.SKIPPED})
STEP_TERMINAL = frozenset(
    {StepStatus.SUCCEEDED, StepStatus.SKIPPED, StepStatus.FAILED, StepStatus.CANCELLED}
)

_ANY_LIVE_TO_END = {RunStatus.CANCELLED, RunStatus.FAILED}
# An operator may end a stopped run on purpose with what it has ("finish with partial
# results"); the engine ends a running one with exceptions when its record carries any.
_STOPPED_TO_PARTIAL = {RunStatus.COMPLETED_WITH_EXCEPTIONS}
RUN_TRANSITIONS: dict[str, frozenset[str]] = {
    RunStatus.QUEUED: frozenset({RunStatus.RUNNING, RunStatus.BLOCKED, *_ANY_LIVE_TO_END}),
    RunStatus.RUNNING: frozenset(
        {
            RunStatus.QUEUED,
            RunStatus.WAITING,
            RunStatus.BLOCKED,
            RunStatus.UNKNOWN,
            RunStatus.SUCCEEDED,
            RunStatus.COMPLETED_WITH_EXCEPTIONS,
            *_ANY_LIVE_TO_END,
        }
    ),
    RunStatus.WAITING: frozenset({RunStatus.QUEUED, RunStatus.BLOCKED, *_ANY_LIVE_TO_END,
                                  *_STOPPED_TO_PARTIAL}),
    RunStatus.BLOCKED: frozenset({RunStatus.QUEUED, *_ANY_LIVE_TO_END, *_STOPPED_TO_PARTIAL}),
    RunStatus.UNKNOWN: frozenset({RunStatus.QUEUED, RunStatus.BLOCKED, *_ANY_LIVE_TO_END,
                                  *_STOPPED_TO_PARTIAL}),
    RunStatus.SUCCEEDED: frozenset(),
    RunStatus.COMPLETED_WITH_EXCEPTIONS: frozenset(),
    RunStatus.FAILED: frozenset(),
    RunStatus.CANCELLED: frozenset(),
}

STEP_TRANSITIONS: dict[str, frozenset[str]] = {
    StepStatus.PENDING: frozenset(
        {StepStatus.RUNNING, StepStatus.SKIPPED, StepStatus.CANCELLED, StepStatus.BLOCKED}
    ),
    StepStatus.RUNNING: frozenset(
        {
            StepStatus.SUCCEEDED,
            StepStatus.FAILED,
            StepStatus.BLOCKED,
            StepStatus.CANCELLED,
            StepStatus.SKIPPED,
            StepStatus.PENDING,
        }
    ),
    StepStatus.BLOCKED: frozenset(
        {StepStatus.RUNNING, StepStatus.PENDING, StepStatus.SKIPPED, StepStatus.CANCELLED,
         StepStatus.FAILED}
    ),
    StepStatus.FAILED: frozenset({StepStatus.PENDING, StepStatus.SKIPPED}),
    StepStatus.SUCCEEDED: frozenset({StepStatus.PENDING}),
    StepStatus.SKIPPED: frozenset({StepStatus.PENDING}),
    StepStatus.CANCELLED: frozenset(),
}


def is_terminal(status: str) -> bool:
    """Return True when a run in ``status`` will never change again."""
    return status in TERMINAL


def needs_attention(status: str) -> bool:
    """Return True when a run in ``status`` is waiting, blocked or unknown."""
    return status in ATTENTION


def is_stuck(status: str) -> bool:
    """Return True when a run in ``status`` stays stopped until an operator decides."""
    return status in STUCK


def run_can_move(src: str, dst: str) -> bool:
    """Return True when a run may move from ``src`` to ``dst``."""
    return dst in RUN_TRANSITIONS.get(src, frozenset())


def step_can_move(src: str, dst: str) -> bool:
    """Return True when a step may move from ``src`` to ``dst``."""
    return dst in STEP_TRANSITIONS.get(src, frozenset())
