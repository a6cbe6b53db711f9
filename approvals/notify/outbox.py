"""The outbox writer: deliveries written in the same transaction as their cause.

An approval's row (approvals.records) and a run's move to blocked/unknown
(runs.engine.runtime.transition) call these inside their own transaction, so a message is
owed exactly when its cause committed; the sender (approvals.notify.sender) sends it later.
Every row has a unique key, and inserts skip conflicts: a repeated cause adds nothing.
"""
from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from agentops import clock
from approvals.models import Approval, Delivery, NotifyRule, NotifyTrack
from approvals.notify.routing import rules_matching
from approvals.statuses import NotifyStage, NotifySubject


def approvals_assign(rows: list[Approval], *, agent: str, team_id: int
                     ) -> list[tuple[Approval, list[NotifyRule]]]:
    """Assign each unsaved approval to its team's first matching rule's group; return matches."""
    plans = []
    for a in rows:
        rules = rules_matching(subject=NotifySubject.APPROVAL, team_id=team_id, agent=agent,
                               tool=a.tool, risk=a.risk)
        grouped = [r for r in rules if r.group_id]
        if grouped and a.assigned_group_id is None:
            a.assigned_group_id = grouped[0].group_id
        plans.append((a, rules))
    return plans


def approvals_notify(plans: list[tuple[Approval, list[NotifyRule]]]) -> None:
    """Write the SLA clocks and first deliveries of approvals just inserted (pks set)."""
    for a, rules in plans:
        for rule in rules:
            track = _track(key=f"approval:{a.pk}:rule:{rule.pk}", subject=NotifySubject.APPROVAL,
                           run_id=a.run_id, approval_id=a.pk, rule=rule)
            deliveries_write(track=track, rule=rule, stage=NotifyStage.NOTIFY,
                             group_id=rule.group_id)


def stuck_writer(run: Any, *, reason: str, version: int) -> Callable[[], None]:
    """Return a writer owing the notices of ``run`` going stuck for ``reason`` at ``version``."""

    def write() -> None:
        for rule in rules_matching(subject=NotifySubject.STUCK, team_id=run.team_id,
                                   agent=run.agent_name, failure_class=reason):
            track = _track(key=f"run:{run.pk}:v{version}:rule:{rule.pk}",
                           subject=NotifySubject.STUCK, run_id=run.pk, approval_id=None,
                           rule=rule)
            deliveries_write(track=track, rule=rule, stage=NotifyStage.NOTIFY,
                             group_id=rule.group_id)

    return write


def deliveries_write(*, track: NotifyTrack, rule: NotifyRule, stage: str,
                     group_id: int | None) -> int:
    """Write one delivery per recipient of ``rule``'s channel for ``stage``; return how many.

    An email channel reaches each active member of the group with an address; a chat or
    webhook channel is one delivery to the channel itself.
    """
    decl = settings.AGENTOPS_NOTIFY_CHANNELS.get(rule.channel, {})
    kind = decl.get("kind", "")
    group_name = _group_name(group_id)
    if kind == "email":
        targets: Iterable[tuple[str, int | None]] = _members(group_id)
    else:
        # An undeclared channel still gets its row: the sender fails it, naming the channel,
        # so a rule pointing nowhere shows in the console instead of silently sending nothing.
        targets = [(rule.channel, None)]
    now = clock.now()
    rows = [Delivery(key=delivery_key(track.key, stage, rule.channel, to), track=track,
                     run_id=track.run_id, approval_id=track.approval_id, stage=stage,
                     channel=rule.channel, kind=kind, recipient=to, user_id=user_id,
                     group_name=group_name, next_at=now)
            for to, user_id in targets]
    Delivery.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def delivery_key(track_key: str, stage: str, channel: str, recipient: str) -> str:
    """Return the idempotency key of one delivery (the same cause → the same key)."""
    return hashlib.sha256(f"{track_key}|{stage}|{channel}|{recipient}".encode()).hexdigest()


def _track(*, key: str, subject: str, run_id: Any, approval_id: int | None,
           rule: NotifyRule) -> NotifyTrack:
    due = clock.now() + dt.timedelta(seconds=rule.sla_s) if rule.sla_s else None
    NotifyTrack.objects.bulk_create([NotifyTrack(
        key=key, subject=subject, run_id=run_id, approval_id=approval_id, rule=rule,
        group_id=rule.group_id, due_at=due)], ignore_conflicts=True)
    return NotifyTrack.objects.get(key=key)


def _members(group_id: int | None) -> list[tuple[str, int | None]]:
    if group_id is None:
        return []
    users = (get_user_model().objects.filter(groups__id=group_id, is_active=True)
             .exclude(email="").order_by("pk").values_list("email", "pk"))
    return list(users)


def _group_name(group_id: int | None) -> str:
    if group_id is None:
        return ""
    return Group.objects.filter(pk=group_id).values_list("name", flat=True).first() or ""
