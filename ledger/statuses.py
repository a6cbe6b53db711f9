"""Tool-call statuses, their named sets and legal transitions as data."""
from __future__ import annotations

from django.db import models


class ToolCallStatus(models.TextChoices):
    """Where a ledger entry (one tool call the model asked for) is."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    UNKNOWN = "unknown"
    AWAITING_APPROVAL = "awaiting_approval"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    COMPENSATED = "compensated"
    CONFIRMED_EXECUTED = "confirmed_executed"
    CONFIRMED_NOT_EXECUTED = "confirmed_not_executed"
    # Asked for by the model but refused before dispatch (no such tool, arguments that fail
    # the tool's schema): recorded so it is visible and counted, never run.
    REFUSED = "refused"


class Effect(models.TextChoices):
    """Whether a tool changes the outside world."""

    READ = "read"
    WRITE = "write"


class Reversibility(models.TextChoices):
    """Whether a write can be undone by its compensation."""

    REVERSIBLE = "reversible"
    MANUAL = "manual"
    IRREVERSIBLE = "irreversible"


def reversibility_of(declared: str | None, *, write: bool, compensable: bool) -> str:
    """Return a tool's reversibility: "reversible" only for a write with a compensation.

    Undeclared, a write without a compensation is "irreversible" (the safe default: nothing
    undoes it); a read is "reversible" (it changes nothing).
    """
    if declared:
        return declared
    return Reversibility.REVERSIBLE if compensable or not write else Reversibility.IRREVERSIBLE


def effect_class_of(*, effect: str, idempotent: bool, reversibility: str) -> str:
    """Return read / idempotent / reversible / manual / irreversible (docs/sdk.md's table).

    A keyed write is "idempotent" (repeats are deduplicated) unless its author said only a
    person can undo it ("manual"); otherwise the reversibility names the class.
    """
    if effect != Effect.WRITE:
        return "read"
    if idempotent and reversibility != Reversibility.MANUAL:
        return "idempotent"
    return reversibility


S = ToolCallStatus
# What the console shows for each value (``{{ tc.status|label:"call" }}``).
TOOLCALL_LABELS: dict[str, str] = {
    S.PENDING: "pending", S.RUNNING: "running", S.SUCCEEDED: "succeeded", S.FAILED: "failed",
    S.TIMED_OUT: "timed out", S.UNKNOWN: "outcome unknown",
    S.AWAITING_APPROVAL: "awaiting approval", S.REJECTED: "rejected", S.CANCELLED: "cancelled",
    S.COMPENSATED: "undone", S.CONFIRMED_EXECUTED: "confirmed: it happened",
    S.CONFIRMED_NOT_EXECUTED: "confirmed: it did not happen", S.REFUSED: "refused",
}
OPEN = frozenset({S.PENDING, S.RUNNING, S.AWAITING_APPROVAL})
IN_FLIGHT = frozenset({S.PENDING, S.RUNNING})
DONE_OK = frozenset({S.SUCCEEDED, S.CONFIRMED_EXECUTED})
SETTLED = frozenset(
    {S.SUCCEEDED, S.FAILED, S.REJECTED, S.CANCELLED, S.COMPENSATED, S.CONFIRMED_EXECUTED,
     S.REFUSED}
)
# A write in one of these never happened (or was undone): proposing it again is a new
# generation of its idempotency key, not a duplicate.
REDOABLE = frozenset({S.CANCELLED, S.COMPENSATED})

# An attempt's outcome: where a call may land after it ran (attempts of calls that are safe
# to repeat are not marked running first, so they land straight from pending or a retry).
_OUTCOMES = {S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.UNKNOWN}
TOOLCALL_TRANSITIONS: dict[str, frozenset[str]] = {
    S.PENDING: frozenset({S.RUNNING, S.AWAITING_APPROVAL, S.CANCELLED, *_OUTCOMES}),
    S.AWAITING_APPROVAL: frozenset({S.PENDING, S.REJECTED, S.CANCELLED}),
    S.RUNNING: frozenset({S.CANCELLED, S.PENDING, *_OUTCOMES}),
    S.TIMED_OUT: frozenset({S.RUNNING, S.PENDING, S.CANCELLED, *_OUTCOMES}),
    S.FAILED: frozenset({S.PENDING, S.RUNNING, S.COMPENSATED, S.CANCELLED, *_OUTCOMES}),
    # A late report of the worker (after a cancel marked the call unknown) may settle it.
    S.UNKNOWN: frozenset({S.CONFIRMED_EXECUTED, S.CONFIRMED_NOT_EXECUTED, S.SUCCEEDED, S.FAILED,
                          S.CANCELLED}),
    S.CONFIRMED_NOT_EXECUTED: frozenset({S.PENDING, S.RUNNING, S.CANCELLED, *_OUTCOMES}),
    S.SUCCEEDED: frozenset({S.COMPENSATED}),
    S.CONFIRMED_EXECUTED: frozenset({S.COMPENSATED}),
    S.REJECTED: frozenset(),
    # A result that arrives after cancel is recorded on the call; the run stays cancelled.
    S.CANCELLED: frozenset({S.SUCCEEDED}),
    S.COMPENSATED: frozenset(),
    S.REFUSED: frozenset(),
}


def toolcall_can_move(src: str, dst: str) -> bool:
    """Return True when a tool call may move from ``src`` to ``dst``."""
    return dst in TOOLCALL_TRANSITIONS.get(src, frozenset())
