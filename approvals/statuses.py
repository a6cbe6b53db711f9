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
