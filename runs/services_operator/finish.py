"""Finish with partial results: an operator ends a stopped run on purpose with what it has.

The run ends ``completed_with_exceptions`` (never ``succeeded``), listing what was not done:
the steps left, and every exception it already carried. Calls that never ran are cancelled,
pending approvals go stale and live child runs are cancelled, as on cancel.
"""
from __future__ import annotations

from typing import Any

from agentops import clock
from runs.engine.core import reducer
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.exceptions import exceptions_resolve, unknown_calls
from runs.engine.runtime.transition import run_transition
from runs.event_types import EventType
from runs.models import Run
from runs.services import run_cancel
from runs.services_cancel import run_cancel_writes
from runs.services_operator.common import actor_name, run_locked, state_projection
from runs.services_operator.rules import FINISH as FINISH_STATUSES
from runs.statuses import TERMINAL, RunStatus, StepStatus


def steps_not_done(state: dict[str, Any]) -> list[str]:
    """Return the plan steps that neither succeeded nor were skipped."""
    return [p["key"] for p in state["plan"]
            if state["steps"][p["key"]]["status"] not in (StepStatus.SUCCEEDED,
                                                          StepStatus.SKIPPED)]


def finish_exceptions(run: Run, state: dict[str, Any]) -> list[dict[str, Any]]:
    """Return the exceptions the run ends with once ``state`` is final (dated, resolved)."""
    now = clock.now().isoformat()
    items = exceptions_resolve(run.pk, [*state.get("exceptions", []), *unknown_calls(run.pk)])
    return [{**i, "when": i["when"] or now} for i in items]


def run_finish_partial(*, run: Run, actor: Any, reason: str) -> dict[str, Any]:
    """End a blocked, unknown or waiting run as completed with exceptions, on purpose."""
    who = actor_name(actor)
    with run_locked(run, FINISH_STATUSES, "finish with partial results") as state:
        not_done = steps_not_done(state)
        finished = NewEvent(EventType.RUN_FINISHED_PARTIAL, {"by": who, "reason": reason[:2000],
                                                     "not_done": not_done}, actor=who)
        new = reducer.fold(state, [{"seq": run.last_seq + 1, "type": finished.type,
                                    "data": finished.data}])
        exceptions = finish_exceptions(run, new)
        children = list(Run.objects.filter(parent=run).exclude(status__in=list(TERMINAL)))
        run_transition(run, RunStatus.COMPLETED_WITH_EXCEPTIONS, reason="finished_partial",
                       detail=reason[:500], actor=who, events=[finished],
                       fields={**state_projection(new), "exceptions": exceptions,
                               "current_tool_call": ""},
                       also=run_cancel_writes(run, "the run was finished with partial results"))
        for child in children:
            run_cancel(run=child, actor=actor, parent=run,
                       reason=f"its parent run {run.pk} was finished with partial results")
    return {"not_done": not_done, "exceptions": len(exceptions),
            "cancelled_children": [str(c.pk) for c in children]}
