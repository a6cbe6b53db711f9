"""Continue on the deployed version: fork a run whose pinned agent version is gone."""
from __future__ import annotations

from typing import Any

from django.db import transaction

from agentops.agents import registry
from approvals.errors import ActionNotApplicable
from runs.errors import UnknownAgent
from runs.models import Run
from runs.services import run_cancel
from runs.services_operator.common import actor_name
from runs.services_signals import run_fork
from runs.statuses import BlockReason, RunStatus


def deployed_version_for(run: Run) -> str:
    """Return the deployed version a run pinned to a missing version can continue on, or ""."""
    if registry.has(run.agent_name, run.agent_version):
        return ""
    try:
        return registry.get(run.agent_name).version
    except UnknownAgent:
        return ""


def run_fork_deployed(*, run: Run, actor: Any, reason: str = "") -> dict[str, Any]:
    """Fork ``run`` at its latest event onto the deployed version, then cancel the original."""
    version = deployed_version_for(run)
    if run.attention_reason != BlockReason.VERSION_MISMATCH or not version:
        raise ActionNotApplicable("only a run blocked because its agent version is gone can "
                                  "continue on the deployed version", status=run.status)
    with transaction.atomic():
        run.refresh_from_db()
        if run.status != RunStatus.BLOCKED:
            raise ActionNotApplicable(f"the run is {run.status} now", status=run.status)
        fork = run_fork(run=run, seq=run.last_seq, actor=actor, version=version)
        note = f"continued on {run.agent_name}@{version} as run {fork.pk}"
        run_cancel(run=run, actor=actor, reason=f"{note}: {reason}" if reason else note)
    return {"fork": str(fork.pk), "from_version": run.agent_version, "to_version": version,
            "at_seq": fork.forked_at_seq, "by": actor_name(actor)}
