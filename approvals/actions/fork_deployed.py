"""Continue on the deployed version: fork a run whose agent version is gone, end the original."""
from __future__ import annotations

from typing import Any

from approvals.actions.base import Action
from approvals.errors import ActionNotApplicable
from runs.models import Run
from runs.services_operator import deployed_version_for, run_fork_deployed
from runs.statuses import BlockReason, RunStatus


class ForkDeployed(Action):
    """Start a fork of the run on the deployed agent version; the original is cancelled."""

    name, verb = "run.fork_deployed", "fork_deployed"
    label = "Continue on deployed version"
    help = ("Start a new run from this one's last event on the deployed agent version; this "
            "run is cancelled, pointing to the new one.")
    statuses = (RunStatus.BLOCKED,)

    def applies(self, target: Run) -> None:
        """Refuse unless the run is blocked on a missing version and another is deployed."""
        super().applies(target)
        if target.attention_reason != BlockReason.VERSION_MISMATCH:
            raise ActionNotApplicable("this run's agent version is still deployed; retry it "
                                      "instead", status=target.status)
        if not deployed_version_for(target):
            raise ActionNotApplicable(f"no version of {target.agent_name} is deployed to "
                                      "continue on", status=target.status)

    def perform(self, user: Any, target: Run, reason: str, **params: Any) -> dict[str, Any]:
        """Call run_fork_deployed."""
        return run_fork_deployed(run=target, actor=user, reason=reason)


ACTION = ForkDeployed()

