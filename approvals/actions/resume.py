"""Resume: continue a run its budget paused, once the budget was raised."""
from __future__ import annotations

from typing import Any

from approvals.actions.base import Action, bind, call_preview, step_calls
from runs.models import Run
from runs.services_operator import run_resume
from runs.statuses import RunStatus


class Resume(Action):
    """Put a budget-paused run back in the queue."""

    name, verb = "run.resume", "resume"
    statuses = (RunStatus.BLOCKED,)

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_resume."""
        return run_resume(run=target, actor=user, reason=reason)

    def preview(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """List the step's calls that were waiting to run."""
        return [call_preview(c, "runs") for c in step_calls(target)]


ACTION = Resume()


def action_for(**kwargs: Any) -> Any:
    """Return the action bound for the console."""
    return bind(ACTION, **kwargs)
