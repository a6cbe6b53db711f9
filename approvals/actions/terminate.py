"""Terminate: cancel the run with a reason; nothing new starts."""
from __future__ import annotations

from typing import Any

from approvals.actions.base import Action
from runs.models import Run
from runs.services_operator import rules, run_terminate


class Terminate(Action):
    """Cancel the run (RunCancelled first; late results are recorded, never turn it green)."""

    name, verb = "run.terminate", "terminate"
    label = "Terminate"
    help = "Cancel the run. Nothing new starts; an in-flight tool is told to stop."
    statuses = rules.LIVE
    bulk = True
    danger = True
    confirm_word = "terminate"
    during_rollback = True  # run_terminate does not wait for a rollback

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_terminate."""
        return run_terminate(run=target, actor=user, reason=reason)


ACTION = Terminate()
