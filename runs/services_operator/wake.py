"""Wake now: end a run's timer wait early (a backoff or a rate-limit wait) and run it."""
from __future__ import annotations

from typing import Any

from agentops import clock
from approvals.errors import ActionNotApplicable
from ledger.models import ToolCall
from ledger.statuses import ToolCallStatus as TC
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.world import waited_s
from runs.event_types import EventType
from runs.models import Run
from runs.services_operator.common import actor_name, requeue, run_locked
from runs.statuses import RunStatus, WaitKind

_BACKING_OFF = (TC.PENDING, TC.FAILED, TC.TIMED_OUT, TC.CONFIRMED_NOT_EXECUTED)


def run_wake(*, run: Run, actor: Any, reason: str = "") -> dict[str, Any]:
    """End the timer wait now: the step's calls backing off become due and the run is queued."""
    who = actor_name(actor)
    with run_locked(run, [RunStatus.WAITING], "wake") as state:
        if run.wait_kind != WaitKind.TIMER:
            raise ActionNotApplicable(f"only a timer wait can be woken early; this run waits "
                                      f"for {run.wait_kind or 'nothing'}", status=run.status)
        step = (run.wait_data or {}).get("step") or state["current_step"] or ""
        until = run.wait_until
        due = ToolCall.objects.filter(run=run, step_key=step, status__in=_BACKING_OFF,
                                      not_before__gt=clock.now())
        woken = list(due.values_list("tool_call_id", flat=True))
        # Only the retry time changes; the calls' statuses stay as the ledger recorded them.
        also = [lambda: due.update(not_before=None)] if woken else []
        events = [NewEvent(EventType.WAIT_ENDED, {"kind": WaitKind.TIMER, "why": "woken", "by": who,
                                          "until": until.isoformat() if until else None,
                                          "waited_s": waited_s(run)},
                           actor=who)]
        requeue(run, state, events, reason="operator_wake", actor=who, detail=reason, also=also)
    return {"step": step, "was_until": until.isoformat() if until else None,
            "calls_due_now": woken}
