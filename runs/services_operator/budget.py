"""Budgets from the console: raise a run's limits (admins) and resume a run they paused."""
from __future__ import annotations

import datetime as dt
from typing import Any

from agentops import clock
from agentops.errors import InvalidInput
from approvals.errors import ActionNotApplicable
from runs.engine.runtime.budgets import budget_exhausted
from runs.engine.runtime.events import NewEvent, event_append
from runs.engine.runtime.snapshots import load_state
from runs.event_types import EventType
from runs.models import Run
from runs.services_operator import rules
from runs.services_operator.common import actor_name, requeue, run_locked
from runs.statuses import BlockReason, RunStatus

_BUDGETS = {"tokens": "budget_tokens", "model_calls": "budget_model_calls",
            "tool_calls": "budget_tool_calls", "cost_micros": "budget_cost_micros"}


def run_resume(*, run: Run, actor: Any, reason: str = "") -> dict[str, Any]:
    """Continue a run that its budget paused, once the budget allows it."""
    who = actor_name(actor)
    with run_locked(run, rules.RESUME, "resume") as state:
        refusal = rules.resume_refusal(run)
        if refusal:
            raise ActionNotApplicable(refusal)
        requeue(run, state, [NewEvent(EventType.RUN_RESUMED, {"by": who}, actor=who)],
                reason="operator_resume", actor=who, detail=reason)
    return {"resumed": True}



def run_raise_budget(*, run: Run, actor: Any, reason: str = "", seconds: int | None = None,
                     **limits: int | None) -> dict[str, Any]:
    """Raise the run's limits; a run its budget paused resumes when they now allow it."""
    who = actor_name(actor)
    new = _budget_values(limits, seconds)
    with run_locked(run, rules.LIVE, "raise the budget of"):
        old = {k: getattr(run, k) for k in new}
        for column, value in new.items():
            current = old[column]
            if column != "deadline" and (current is None or value <= current):
                raise InvalidInput(f"{column.removeprefix('budget_')} {value} is not above the "
                                   f"current limit {'unlimited' if current is None else current}")
        data = {"old": _jsonable(old), "new": _jsonable(new), "by": who}
        event_append(run=run, events=[NewEvent(EventType.RUN_BUDGET_RAISED, data, actor=who)],
                     fields=new)
        state = load_state(run)
        resumed = (run.status == RunStatus.BLOCKED
                   and run.attention_reason == BlockReason.BUDGET_EXHAUSTED
                   and budget_exhausted(run, state["usage"]) is None)
        if resumed:
            requeue(run, state, [NewEvent(EventType.RUN_RESUMED, {"by": who}, actor=who)],
                    reason="operator_resume", actor=who, detail=reason)
    return {**data, "resumed": resumed}


def _budget_values(limits: dict[str, int | None], seconds: int | None) -> dict[str, Any]:
    unknown = set(limits) - set(_BUDGETS)
    if unknown:
        raise InvalidInput(f"unknown budget {sorted(unknown)}; known: {', '.join(_BUDGETS)}")
    new: dict[str, Any] = {}
    for key, value in {**limits, "seconds": seconds}.items():
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise InvalidInput(f"budget {key} must be a positive whole number, got {value!r}")
        if key == "seconds":
            new["deadline"] = clock.now() + dt.timedelta(seconds=value)
        else:
            new[_BUDGETS[key]] = value
    if not new:
        raise InvalidInput("name at least one limit to raise")
    return new


def _jsonable(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, dt.datetime) else v for k, v in values.items()}


