"""Raise budget (admins): raise a run's limits; a run they paused resumes."""
from __future__ import annotations

from typing import Any

from approvals.actions.base import Action, bind, call_preview, step_calls
from approvals.errors import ActionNotApplicable
from approvals.roles import ADMIN
from runs.models import Run
from runs.services_operator import run_raise_budget
from runs.statuses import BlockReason, RunStatus


class RaiseBudget(Action):
    """Raise tokens / model_calls / tool_calls / cost_micros / seconds for one run."""

    name, verb = "run.raise_budget", "raise_budget"
    roles = (ADMIN,)

    def applies(self, target: Run) -> None:
        """Refuse a run that already ended."""
        if target.is_terminal:
            raise ActionNotApplicable(f"the run already ended ({target.status})",
                                      status=target.status)

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_raise_budget with the new limits."""
        return run_raise_budget(run=target, actor=user, reason=reason, **params)

    def preview(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """List the calls that run when a budget-paused run resumes."""
        paused = (target.status == RunStatus.BLOCKED
                  and target.attention_reason == BlockReason.BUDGET_EXHAUSTED)
        return [call_preview(c, "runs") for c in step_calls(target)] if paused else []


ACTION = RaiseBudget()


def action_for(**kwargs: Any) -> Any:
    """Return the action bound for the console."""
    return bind(ACTION, **kwargs)
