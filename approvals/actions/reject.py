"""Reject: refuse the tool call; the agent sees the reason and finds another way."""
from __future__ import annotations

from typing import Any

from approvals.actions.approve import ApprovalAction
from approvals.models import Approval
from approvals.services import approval_decide


class Reject(ApprovalAction):
    """Reject with a reason (required: the model sees it)."""

    name, verb = "approval.reject", "reject"
    label = "Reject"
    help = "Refuse the tool call; the agent sees your reason and finds another way."
    reason_required = True
    approves = False

    def perform(self, user: Any, target: Approval, reason: str, **params: Any) -> dict[str, Any]:
        """Call approval_decide(approve=False)."""
        return self.decided(approval_decide(approval=target, user=user, approve=False,
                                            reason=reason))


ACTION = Reject()
