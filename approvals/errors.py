"""Errors of approvals and operator actions."""
from __future__ import annotations

from django.core.exceptions import PermissionDenied

from agentops.errors import AgentOpsError, Conflict, InvalidInput, NotFound


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


class IllegalApprovalTransition(Conflict, ApprovalError):
    """An approval status change the transition table does not allow; nothing was changed."""

    code = "illegal_transition"

    def __init__(self, src: str, dst: str, **details: object) -> None:
        super().__init__(f"an approval cannot move from {src} to {dst}", src=src, dst=dst,
                         **details)
        self.src, self.dst = src, dst


class UnknownAction(NotFound, ApprovalError):
    """No operator action has this verb; the message lists the known ones."""

    code = "unknown_action"


class ConfirmationRequired(InvalidInput, ApprovalError):
    """A high-risk approval or an irreversible action came without its typed confirmation
    (the amount or the word); nothing was decided or changed."""

    code = "confirmation_required"



class DeliveryFailed(ApprovalError):
    """A notification could not be sent; ``retryable`` says whether trying again may help."""

    code = "delivery_failed"

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message, retryable=retryable)
        self.retryable = retryable


class InvalidNotifyRule(InvalidInput, ApprovalError):
    """A routing rule names a channel or group that does not fit; the message says which."""

    code = "invalid_rule"
