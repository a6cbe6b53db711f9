"""The two-person rule: each approver's decision on an approval that needs several.

An approval with ``approvers_required`` > 1 keeps one ``ApprovalVote`` per person (unique
(approval, user)). Only approvals of the current ``Approval.version`` count: an edit of the
arguments bumps the version, so an approval given before it is stale. The requester never
decides (approval_decide refuses them), so every counted vote is someone else's.
"""
from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from agentops import clock
from approvals.errors import AlreadyVoted
from approvals.models import Approval, ApprovalVote


def vote_record(*, approval: Approval, user: Any, approve: bool) -> int:
    """Record ``user``'s decision on the current version; return the approvals that count.

    Raises AlreadyVoted when the same person decided this version already. A person whose
    approval went stale (the arguments changed) may decide the new version.
    """
    try:
        with transaction.atomic():
            ApprovalVote.objects.create(approval=approval, user=user, approve=approve,
                                        version=approval.version)
    except IntegrityError:
        renewed = ApprovalVote.objects.filter(
            approval=approval, user=user, version__lt=approval.version,
        ).update(version=approval.version, approve=approve, at=clock.now())
        if not renewed:
            raise AlreadyVoted(
                f"you already approved this ({approval.tool}); the two-person rule needs a "
                "second, different person to approve it", user=user.get_username(),
            ) from None
    return votes_counted(approval)


def votes_counted(approval: Approval) -> int:
    """Return how many distinct people approved the approval's current version."""
    return (ApprovalVote.objects.filter(approval=approval, approve=True,
                                        version=approval.version)
            .exclude(user_id=approval.requested_by_id).count())


def vote_current(*, approval: Approval, user: Any) -> bool:
    """Return True when ``user`` already approved the current version (may not again)."""
    return ApprovalVote.objects.filter(approval=approval, user_id=getattr(user, "pk", None),
                                       approve=True, version=approval.version).exists()
