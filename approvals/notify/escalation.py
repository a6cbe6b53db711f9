"""SLA clocks: an approval or stuck run nobody acted on reminds, then escalates (the sweeper).

notify → (SLA passes) remind the same group → (SLA passes again) escalate to the rule's
next group, whose approval assignment moves with it. Each step writes its deliveries in the
same transaction that moves the clock, so a reminder is owed exactly once.
"""
from __future__ import annotations

import datetime as dt

from django.db import transaction

from agentops import clock
from approvals.models import Approval, NotifyTrack
from approvals.notify.outbox import deliveries_write
from approvals.statuses import ApprovalStatus, NotifyStage, NotifySubject
from runs.models import Run
from runs.statuses import RunStatus

_STUCK = (RunStatus.BLOCKED, RunStatus.UNKNOWN)


def tracks_escalate(*, limit: int = 50) -> list[int]:
    """Move every SLA clock that ran out one stage on; return the ids of the clocks moved."""
    now = clock.now()
    with transaction.atomic():
        # skip_locked: a clock another sweeper is moving is its; never wait for it.
        due = list(NotifyTrack.objects.select_for_update(skip_locked=True, of=("self",))
                   .filter(closed_at__isnull=True, due_at__lte=now)
                   .select_related("rule").order_by("due_at")[:limit])
        for track in due:
            _advance(track, now)
    return [t.pk for t in due]


def track_open(track: NotifyTrack) -> bool:
    """Return whether the clock's subject still waits for a person."""
    if track.subject == NotifySubject.APPROVAL:
        return Approval.objects.filter(pk=track.approval_id,
                                       status=ApprovalStatus.PENDING).exists()
    if not Run.objects.filter(pk=track.run_id, status__in=_STUCK).exists():
        return False
    # A later stuck episode of the same run has its own clock; this one is over.
    return not NotifyTrack.objects.filter(run_id=track.run_id, subject=NotifySubject.STUCK,
                                          rule_id=track.rule_id, pk__gt=track.pk).exists()


def _advance(track: NotifyTrack, now: dt.datetime) -> None:
    rule = track.rule
    if rule is None or not track_open(track):
        track.closed_at, track.due_at = now, None
        track.save(update_fields=["closed_at", "due_at"])
        return
    if track.stage == NotifyStage.NOTIFY:
        track.stage = NotifyStage.REMIND
        track.due_at = now + dt.timedelta(seconds=rule.sla_s)
    elif track.stage == NotifyStage.REMIND and rule.escalate_to_id:
        track.stage, track.group_id = NotifyStage.ESCALATE, rule.escalate_to_id
        track.due_at = None
        if track.approval_id:
            Approval.objects.filter(pk=track.approval_id).update(
                assigned_group_id=rule.escalate_to_id)
    else:
        # Reminded and nobody further to escalate to: the clock stays overdue on the panel.
        track.due_at = None
        track.save(update_fields=["due_at"])
        return
    track.save(update_fields=["stage", "group", "due_at"])
    deliveries_write(track=track, rule=rule, stage=track.stage, group_id=track.group_id)
