"""Approve: let the tool call run with the arguments it proposed."""
from __future__ import annotations

from typing import Any

from approvals.actions.base import Action, call_preview
from approvals.errors import ActionNotApplicable, NotAllowed
from approvals.models import Approval
from approvals.roles import SUPPORT
from approvals.services import approval_decide
from approvals.statuses import ApprovalStatus
from approvals.votes import vote_current, votes_counted
from runs.models import Run


class ApprovalAction(Action):
    """A decision on one approval (support and admins decide)."""

    target = "approval"
    roles = (SUPPORT,)
    reason_required = False
    approves = True  # counts as one approval under the two-person rule

    def check(self, user: Any, target: Approval) -> None:
        """Refuse other roles, self-approval, a second approval by the same person, and
        approvals decided already."""
        super().check(user, target)
        if target.requested_by_id is not None and target.requested_by_id == getattr(user, "pk", None):
            raise NotAllowed("you asked for this approval; someone else must decide it")
        if self.approves and target.approvers_required > 1 \
                and vote_current(approval=target, user=user):
            raise NotAllowed(f"you already approved this; it needs {target.approvers_required} "
                             "different approvers, so someone else must approve it")

    def applies(self, target: Approval) -> None:
        """Refuse an approval that is no longer pending, saying who decided it."""
        if target.status != ApprovalStatus.PENDING:
            who = target.decided_by.get_username() if target.decided_by else "the system"
            raise ActionNotApplicable(f"this approval was already {target.status} by {who}",
                                      status=target.status, decided_by=who)

    def run_of(self, target: Approval) -> Run:
        """Return the approval's run."""
        return target.run

    def decided(self, approval: Approval) -> dict[str, Any]:
        """Return the audit summary of a decision (with the approvals counted so far)."""
        out = {"approval": approval.pk, "tool": approval.tool,
               "tool_call_id": approval.tool_call.tool_call_id, "status": approval.status,
               "proposed_args": approval.proposed_args, "approved_args": approval.approved_args}
        if approval.approvers_required > 1:
            out.update(approvals=votes_counted(approval), required=approval.approvers_required,
                       version=approval.version)
        return out


class Approve(ApprovalAction):
    """Approve the call as proposed."""

    name, verb = "approval.approve", "approve"
    label = "Approve"
    help = "Let the tool call run with the arguments it proposed."

    def perform(self, user: Any, target: Approval, reason: str, **params: Any) -> dict[str, Any]:
        """Call approval_decide(approve=True)."""
        return self.decided(approval_decide(approval=target, user=user, approve=True,
                                            reason=reason))

    def preview(self, target: Approval, **params: Any) -> list[dict[str, Any]]:
        """List the call that runs once approved."""
        return [call_preview(target.tool_call, "runs with the approved arguments")]


ACTION = Approve()
