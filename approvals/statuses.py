"""Approval statuses and what an expired approval does by default."""
from __future__ import annotations

from django.db import models


class ApprovalStatus(models.TextChoices):
    """Where an approval request is."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    STALE = "stale"


class ExpiryOutcome(models.TextChoices):
    """What happens when nobody decides an approval in time."""

    DENY = "deny"
    CANCEL_RUN = "cancel_run"
    REREQUEST = "rerequest"
    ESCALATE = "escalate"


# What the console shows for each value (``{{ a.status|label:"approval" }}``).
APPROVAL_LABELS: dict[str, str] = {
    ApprovalStatus.PENDING: "pending", ApprovalStatus.APPROVED: "approved",
    ApprovalStatus.REJECTED: "rejected", ApprovalStatus.EXPIRED: "expired",
    ApprovalStatus.STALE: "stale",
}
EXPIRY_LABELS: dict[str, str] = {
    ExpiryOutcome.DENY: "deny", ExpiryOutcome.CANCEL_RUN: "cancel the run",
    ExpiryOutcome.REREQUEST: "ask again", ExpiryOutcome.ESCALATE: "escalate",
}

DECIDED = frozenset({ApprovalStatus.APPROVED, ApprovalStatus.REJECTED})
APPROVAL_TRANSITIONS: dict[str, frozenset[str]] = {
    ApprovalStatus.PENDING: frozenset(
        {ApprovalStatus.APPROVED, ApprovalStatus.REJECTED, ApprovalStatus.EXPIRED,
         ApprovalStatus.STALE}
    ),
    ApprovalStatus.APPROVED: frozenset(),
    ApprovalStatus.REJECTED: frozenset(),
    ApprovalStatus.EXPIRED: frozenset(),
    ApprovalStatus.STALE: frozenset(),
}


def approval_can_move(src: str, dst: str) -> bool:
    """Return True when an approval may move from ``src`` to ``dst``."""
    return dst in APPROVAL_TRANSITIONS.get(src, frozenset())


# Notifications (approvals/notify): the outbox of messages to people, and its attempts.
class DeliveryStatus(models.TextChoices):
    """Where one outgoing message stands: waiting, being sent by a worker, sent, given up."""

    PENDING = "pending"
    SENDING = "sending"
    SENT = "sent"
    FAILED = "failed"


class AttemptStatus(models.TextChoices):
    """How one try to send a delivery ended (``lost``: its worker died before recording)."""

    SENDING = "sending"
    OK = "ok"
    ERROR = "error"
    LOST = "lost"


class NotifyStage(models.TextChoices):
    """Why a message goes out: first notice, reminder at the SLA, escalation to the next group."""

    NOTIFY = "notify"
    REMIND = "remind"
    ESCALATE = "escalate"


class NotifySubject(models.TextChoices):
    """What a routing rule and an SLA clock are about."""

    APPROVAL = "approval"
    STUCK = "stuck"
