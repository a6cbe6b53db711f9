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
class LinkRefused(ApprovalError):
    """A decision link (or a Slack interaction) that may not act; the message says why."""

    code = "link_refused"
    http_status = 403


class LinkInvalid(LinkRefused):
    """The link's signature does not verify (altered, cut short, or for another site)."""

    code = "link_invalid"


class LinkExpired(LinkRefused):
    """The link is older than its lifetime; the console still shows the approval."""

    code = "link_expired"
    http_status = 410


class LinkUsed(LinkRefused):
    """The link (or the Slack interaction) was acted on already: each acts once."""

    code = "link_used"
    http_status = 409


class LinkOutdated(LinkRefused):
    """The approval's arguments changed since the link was sent: it decided other arguments."""

    code = "link_outdated"
    http_status = 409


class LinkWrongUser(LinkRefused):
    """The link was sent to someone else than the person signed in."""

    code = "link_wrong_user"


class AlreadyVoted(Conflict, ApprovalError):
    """The same person approved this version already: a second, different person must."""

    code = "already_voted"


class SignInRefused(ApprovalError):
    """Single sign-on refused this person; the message says why, in words for them."""

    code = "sign_in_refused"
    http_status = 403
