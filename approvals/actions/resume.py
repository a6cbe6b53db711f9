"""Resume: continue a run its budget paused, once the budget was raised."""
from __future__ import annotations

from typing import Any

from approvals.actions.base import Action, consequence_line, step_calls
from approvals.errors import ActionNotApplicable
from runs.models import Run
from runs.services_operator import rules, run_resume


class Resume(Action):
    """Put a budget-paused run back in the queue."""

    name, verb = "run.resume", "resume"
    label = "Resume"
    help = "Continue the run (after its budget was raised)."
    statuses = rules.RESUME
    bulk = True

    def applies(self, target: Run) -> None:
        """Refuse what run_resume refuses: another block reason, or a budget still spent."""
        super().applies(target)
        refusal = rules.resume_refusal(target)
        if refusal:
            raise ActionNotApplicable(refusal, status=target.status)

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_resume."""
        return run_resume(run=target, actor=user, reason=reason)

    def preview(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """List the step's calls that were waiting to run."""
        return [consequence_line(c, self.verb) for c in step_calls(target)]


ACTION = Resume()
