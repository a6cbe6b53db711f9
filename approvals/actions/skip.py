"""Skip: mark the blocked step skipped, optionally with operator-provided output facts."""
from __future__ import annotations

from typing import Any

from approvals.actions.base import Action, bind, call_preview, step_calls
from ledger.statuses import ToolCallStatus as TC
from runs.models import Run
from runs.services_operator import run_skip
from runs.statuses import RunStatus

TC_OPEN = (TC.PENDING, TC.FAILED, TC.TIMED_OUT, TC.AWAITING_APPROVAL, TC.CONFIRMED_NOT_EXECUTED)

class Skip(Action):
    """Skip the step and continue with the next one."""

    name, verb = "run.skip", "skip"
    statuses = (RunStatus.BLOCKED,)

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_skip (``output``: facts for later steps; ``step``: which one)."""
        return run_skip(run=target, actor=user, reason=reason, output=params.get("output"),
                        step=params.get("step"))

    def preview(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """List the step's calls that will be cancelled instead of run (nothing runs again)."""
        return [call_preview(c, "cancelled, never runs")
                for c in step_calls(target, TC_OPEN)]


ACTION = Skip()


def action_for(**kwargs: Any) -> Any:
    """Return the action bound for the console."""
    return bind(ACTION, **kwargs)
