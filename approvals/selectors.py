"""Read-side queries of the approvals inbox."""
from __future__ import annotations

from typing import Any

from django.db.models import F, Q

from approvals.models import Approval, ApprovalVote, Delivery, Intervention, NotifyTrack
from approvals.notify.escalation import track_open
from approvals.statuses import ApprovalStatus

INBOX_LIMIT = 100


def approval_list_pending(*, user: Any = None, limit: int = INBOX_LIMIT) -> list[Approval]:
    """Return pending approvals, the soonest to expire first (no expiry last)."""
    qs = (Approval.objects.filter(status=ApprovalStatus.PENDING)
          .select_related("run", "tool_call", "assigned_group")
          .order_by(F("expires_at").asc(nulls_last=True), "created_at", "id"))
    return list(qs[:limit])


def approval_list_decided(*, limit: int = 50, before_id: int | None = None) -> list[Approval]:
    """Return decided, expired or stale approvals, the newest first."""
    qs = (Approval.objects.exclude(status=ApprovalStatus.PENDING)
          .select_related("run", "decided_by").order_by("-id"))
    if before_id:
        qs = qs.filter(id__lt=before_id)
    return list(qs[:limit])


def approval_votes(approvals: list[Approval]) -> dict[int, list[dict[str, Any]]]:
    """Return, per approval needing several approvers, who approved and whether it counts."""
    several = {a.pk: a for a in approvals if a.approvers_required > 1}
    out: dict[int, list[dict[str, Any]]] = {pk: [] for pk in several}
    for v in ApprovalVote.objects.filter(approval_id__in=several).select_related("user"):
        a = several[v.approval_id]
        out[v.approval_id].append({"who": v.user.get_username(), "at": v.at,
                                   "approve": v.approve, "counts": v.version == a.version})
    return out


def approval_get(*, approval_id: int) -> Approval | None:
    """Return one approval with its run and tool call, or None."""
    return Approval.objects.select_related("run", "tool_call").filter(pk=approval_id).first()


def settings_history(*, teams: list[str] | None, limit: int = 30) -> list[Intervention]:
    """Return the newest settings changes of ``teams`` (slugs; None: every team) and prices."""
    rows = Intervention.objects.filter(action__startswith="settings.")
    if teams is not None:
        rows = rows.filter(Q(data__team__in=teams) | Q(action="settings.model_price"))
    return list(rows.order_by("-id")[:limit])


def deliveries_for_run(*, run_id: Any, limit: int = 200) -> list[Delivery]:
    """Return the run's deliveries (oldest first), each with ``attempt_rows``."""
    rows = list(Delivery.objects.filter(run_id=run_id).prefetch_related("tries")
                .order_by("created_at", "id")[:limit])
    for d in rows:
        d.attempt_rows = list(d.tries.all())
    return rows


def notify_panel(*, run_id: Any) -> dict[str, Any]:
    """Return the run panel's notification facts: open SLA clocks and who was notified when."""
    clocks = [t for t in NotifyTrack.objects.filter(run_id=run_id, closed_at__isnull=True)
              .select_related("group", "rule__escalate_to").order_by("created_at", "id")[:50]
              if track_open(t)]
    return {"clocks": clocks, "deliveries": deliveries_for_run(run_id=run_id, limit=50)}
