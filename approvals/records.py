"""Approval rows the engine creates when a tool call needs a person, and the pending ones it reads.

Below the approval services (which decide and expire): the engine's runtime writes these rows
inside its unit's transaction and never imports approvals.services.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from agentops import clock
from agentops.tools import ToolSpec
from approvals.models import Approval
from approvals.notify.outbox import approvals_assign, approvals_notify
from runs.models import Run
from approvals.statuses import ApprovalStatus, ExpiryOutcome
from ledger.models import ToolCall


def approval_needed(spec: ToolSpec, args: dict[str, Any]) -> str:
    """Return why a person must approve this call, or "" when no approval is needed."""
    if spec.approval == "always":
        return f"{spec.name} always needs approval"
    if spec.approval == "policy" and spec.approval_policy is not None:
        return spec.approval_policy(args) or ""
    return ""


def approval_build(*, run: Any, call: ToolCall, spec: ToolSpec, why: str,
                   state: dict[str, Any]) -> Approval:
    """Return an unsaved Approval for ``call``, bound to its arguments and the run's state."""
    # An irreversible action nobody approved in time is never taken by default.
    outcome = ExpiryOutcome.DENY if spec.reversibility == "irreversible" else spec.approval_on_expiry
    return Approval(
        run_id=run.pk, tool_call=call, tool=spec.name, proposed_args=call.args,
        risk="high" if spec.reversibility == "irreversible" else "medium", why=why[:300],
        state_seq=state["seq"], plan_version=state["plan_version"],
        expires_at=clock.now() + dt.timedelta(seconds=spec.approval_expiry_s),
        expiry_outcome=outcome, approvers_required=spec.approvers,
        # Whoever started the run asked for what it does: they may not approve it themselves.
        requested_by_id=run.created_by_id,
    )


def approvals_insert(rows: list[Approval]) -> Callable[[], None]:
    """Return a writer inserting approval rows inside the unit's transaction.

    The same transaction routes each to its group and writes the notices owed (the outbox).
    """

    def write() -> None:
        runs = {r.pk: r for r in Run.objects.filter(
            pk__in={a.run_id for a in rows}).only("agent_name", "team_id")}
        plans = [p for a in rows for p in approvals_assign(
            [a], agent=runs[a.run_id].agent_name, team_id=runs[a.run_id].team_id)]
        Approval.objects.bulk_create(rows)
        approvals_notify(plans)

    return write


def approval_pending_for_run(run_id: Any) -> list[Approval]:
    """Return the run's pending approvals."""
    return list(Approval.objects.filter(run_id=run_id, status=ApprovalStatus.PENDING))
