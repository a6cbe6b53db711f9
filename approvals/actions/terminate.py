"""Terminate: cancel the run with a reason; nothing new starts."""
from __future__ import annotations

from typing import Any

from approvals.actions.base import Action, bind
from approvals.errors import ActionNotApplicable
from runs.models import Run
from runs.services_operator import run_terminate


class Terminate(Action):
    """Cancel the run (RunCancelled first; late results are recorded, never turn it green)."""

    name, verb = "run.terminate", "terminate"

    def applies(self, target: Run) -> None:
        """Refuse a run that already ended."""
        if target.is_terminal:
            raise ActionNotApplicable(f"the run already ended ({target.status})",
                                      status=target.status)

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_terminate."""
        return run_terminate(run=target, actor=user, reason=reason)


ACTION = Terminate()


def action_for(**kwargs: Any) -> Any:
    """Return the action bound for the console."""
    return bind(ACTION, **kwargs)
