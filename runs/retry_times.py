"""When a run backing off tries again: each waiting tool call's next attempt, or its step's.

A failed tool call that may be retried carries ``not_before`` (ledger.services: settle); the
run then waits on a timer until the soonest of them (``wait_until``). A step that backs off
as a whole (a model error, invalid output) waits on the timer alone. The run page and the
queue show these times so nobody has to guess whether a run is stuck or about to retry.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from agentops import clock
from ledger.models import ToolCall
from ledger.statuses import ToolCallStatus as TC
from runs.models import Run
from runs.statuses import RunStatus, WaitKind

_BACKING_OFF = (TC.FAILED, TC.TIMED_OUT, TC.PENDING)


@dataclass(frozen=True)
class NextAttempt:
    """One thing that runs again at ``at``: a tool call's attempt, or the whole step."""

    at: dt.datetime
    step: str
    tool: str = ""
    tool_call_id: str = ""
    attempt: int = 0  # the attempt number it will be (0: the step, not one call)
    why: str = ""  # what it backs off from ("after timeout", "backoff after rate_limited")


def next_attempts(*, run: Run, limit: int = 5) -> list[NextAttempt]:
    """Return the run's next attempts, soonest first (empty when nothing backs off)."""
    now = clock.now()
    calls = (ToolCall.objects.filter(run=run, status__in=_BACKING_OFF, not_before__gt=now)
             .order_by("not_before", "id")[:limit])
    found = [NextAttempt(at=c.not_before, step=c.step_key, tool=c.tool,
                         tool_call_id=c.tool_call_id, attempt=c.attempts + 1,
                         why=f"after {c.error_class}" if c.error_class else "")
             for c in calls]
    timer = (run.status == RunStatus.WAITING and run.wait_kind == WaitKind.TIMER
             and run.wait_until is not None and run.wait_until > now)
    if timer and not found:
        data = run.wait_data or {}
        found.append(NextAttempt(at=run.wait_until, step=str(data.get("step") or
                                                             run.current_step or ""),
                                 why=str(data.get("reason") or "")))
    return found
