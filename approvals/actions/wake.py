"""Wake now: end a timer wait early (a backoff or a rate-limit wait) and run the step again."""
from __future__ import annotations

from typing import Any

from approvals.actions.base import Action, call_preview, step_calls
from approvals.errors import ActionNotApplicable
from runs.models import Run
from runs.services_operator import run_wake
from runs.statuses import RunStatus, WaitKind


class Wake(Action):
    """Run a run waiting on a timer now instead of at the timer's end."""

    name, verb = "run.wake", "wake"
    label = "Wake now"
    help = "End the timer wait now: the step's calls that were backing off run at once."
    statuses = (RunStatus.WAITING,)
    reason_required = False

    def applies(self, target: Run) -> None:
        """Refuse anything but a timer wait (approvals, signals and children have owners)."""
        super().applies(target)
        if target.wait_kind != WaitKind.TIMER:
            raise ActionNotApplicable(f"only a timer wait can be woken early; this run waits "
                                      f"for {target.wait_kind or 'nothing'}",
                                      status=target.status)

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_wake."""
        return run_wake(run=target, actor=user, reason=reason)

    def preview(self, target: Run, **params: Any) -> list[dict[str, Any]]:
        """List the step's calls that run now instead of at the timer's end."""
        return [call_preview(c, "runs now") for c in step_calls(target)]


ACTION = Wake()

