"""Raise budget (admins): raise a run's limits; a run they paused resumes."""
from __future__ import annotations

from typing import Any

from ninja import Field

from approvals.actions.base import Action, call_preview, step_calls
from approvals.actions.params import ActionParams
from approvals.roles import ADMIN
from runs.models import Run
from runs.services_operator import rules, run_raise_budget
from runs.statuses import BlockReason, RunStatus


def _limit(title: str, le: int, initial: str = "") -> Any:
    extra = {"widget": "number", **({"initial": initial} if initial else {})}
    return Field(None, gt=0, le=le, title=title, json_schema_extra=extra)


class RaiseBudgetParams(ActionParams):
    """New (higher) limits for the run; leave a limit out to keep it."""

    tokens: int | None = _limit("Tokens", 10**12, "budget_tokens")
    cost_micros: int | None = _limit("Cost (micro-$)", 10**15, "budget_cost_micros")
    model_calls: int | None = _limit("Model calls", 10**9, "budget_model_calls")
    tool_calls: int | None = _limit("Tool calls", 10**9, "budget_tool_calls")
    seconds: int | None = _limit("Seconds from now (deadline)", 10**8)


class RaiseBudget(Action):
    """Raise tokens / model_calls / tool_calls / cost_micros / seconds for one run."""

    name, verb = "run.raise_budget", "raise_budget"
    label = "Raise budget"
    help = "Raise this run's limits, then resume it."
    roles = (ADMIN,)
    statuses = rules.LIVE
    params = RaiseBudgetParams

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_raise_budget with the new limits."""
        return run_raise_budget(run=target, actor=user, reason=reason, **params)

    def preview(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """List the calls that run when a budget-paused run resumes."""
        paused = (target.status == RunStatus.BLOCKED
                  and target.attention_reason == BlockReason.BUDGET_EXHAUSTED)
        return [call_preview(c, "runs") for c in step_calls(target)] if paused else []


ACTION = RaiseBudget()
