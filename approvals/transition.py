"""The only writers of ``Approval.status``: one approval, or every pending one of a run.

Both check ``APPROVAL_TRANSITIONS`` before writing and stamp ``decided_at`` (and who, and
why); an illegal move raises IllegalApprovalTransition (409) and writes nothing.
"""
from __future__ import annotations

from typing import Any

from agentops import clock
from approvals.errors import IllegalApprovalTransition
from approvals.models import Approval
from approvals.statuses import ApprovalStatus, approval_can_move


def approval_transition(approval: Approval, to: str, *, reason: str, user: Any = None,
                        **fields: Any) -> Approval:
    """Move ``approval`` (locked by the caller) to ``to``, stamping who, when and why."""
    _check(approval.status, to, approval.pk)
    approval.status, approval.decided_at, approval.reason = to, clock.now(), reason
    if user is not None:
        approval.decided_by = user
    for name, value in fields.items():
        setattr(approval, name, value)
    approval.save(update_fields=["status", "decided_at", "reason",
                                 *(["decided_by"] if user is not None else []), *fields])
    return approval


def approvals_close_pending(*, run: Any, to: str, reason: str) -> list[int]:
    """Move every pending approval of ``run`` to ``to`` (stale, expired); return their ids."""
    _check(ApprovalStatus.PENDING, to, None)
    ids = list(Approval.objects.filter(run=run, status=ApprovalStatus.PENDING)
               .order_by("pk").values_list("pk", flat=True))
    Approval.objects.filter(pk__in=ids, status=ApprovalStatus.PENDING).update(
        status=to, decided_at=clock.now(), reason=reason[:2000])
    return ids


def _check(src: str, dst: str, pk: int | None) -> None:
    if not approval_can_move(src, dst):
        raise IllegalApprovalTransition(src, dst, approval=pk)
