"""Errors of approvals and operator actions."""
from __future__ import annotations

from django.core.exceptions import PermissionDenied

from agentops.errors import AgentOpsError, Conflict


class ApprovalError(AgentOpsError):
    """Base of approval and action errors."""


class NotAllowed(PermissionDenied):
    """The user's role does not allow this action; nothing was changed."""

    code = "forbidden"
    http_status = 403

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict = {}


class AlreadyDecided(Conflict, ApprovalError):
    """Someone decided this approval first; ``decided_by`` says who."""

    code = "already_decided"


class StaleApproval(Conflict, ApprovalError):
    """The run moved on since the approval was asked; it can no longer be approved."""

    code = "stale_approval"


class ActionNotApplicable(Conflict, ApprovalError):
    """The action does not apply to the run in its current state."""

    code = "not_applicable"
