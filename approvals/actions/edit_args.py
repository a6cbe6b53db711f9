"""Edit and approve: approve the call with corrected arguments (checked against its schema)."""
from __future__ import annotations

from typing import Any

from ninja import Field

from agentops.errors import InvalidInput
from approvals.actions.approve import ApprovalAction
from approvals.actions.base import call_preview
from approvals.actions.params import ActionParams
from approvals.models import Approval
from approvals.services import approval_decide


class EditArgsParams(ActionParams):
    """The corrected arguments (a JSON object, checked against the tool's schema)."""

    args: dict[str, Any] = Field(title="Arguments", json_schema_extra={"widget": "json"})


class EditApprove(ApprovalAction):
    """Approve with edited arguments; proposed, approved and executed arguments are all kept."""

    name, verb = "approval.edit_approve", "edit_args"
    label = "Edit and approve"
    help = ("Approve the call with corrected arguments (checked against the tool's schema); "
            "proposed, approved and executed arguments are all kept.")
    params = EditArgsParams

    def perform(self, user: Any, target: Approval, reason: str, **params: Any) -> dict[str, Any]:
        """Call approval_decide with ``args`` (or ``edited_args``)."""
        args = params.get("edited_args", params.get("args"))
        if not isinstance(args, dict):
            raise InvalidInput("edited arguments must be a JSON object", field="args")
        return self.decided(approval_decide(approval=target, user=user, approve=True,
                                            reason=reason, edited_args=args))

    def preview(self, target: Approval, **params: Any) -> list[dict[str, Any]]:
        """List the call that runs once approved, with the edited arguments."""
        return [call_preview(target.tool_call, "runs with the edited arguments")]


ACTION = EditApprove()
