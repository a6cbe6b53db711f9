"""Audit rows for changes that are not operator actions (settings), and their numbering.

The console reads rows through runs.selectors.audit_list; the export (approvals.audit_export)
and the sink (approvals.audit_sink) read them by ``seq``, which audit_sequence gives.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F, Max

from approvals.models import AuditSequence, Intervention


def audit_record(*, actor: Any, action: str, reason: str = "", run: Any = None,
                 data: dict[str, Any] | None = None, team: Any = None) -> Intervention:
    """Write an audit row for something that is not an operator action (e.g. a setting).

    ``team``: the team a setting belongs to (a run's row takes its run's team by itself);
    none for installation-wide settings, which only installation admins export.
    """
    return Intervention.objects.create(
        run=run, team=team, actor=actor if getattr(actor, "pk", None) else None,
        actor_name=actor.get_username() if hasattr(actor, "get_username") else str(actor or
                                                                                    "system"),
        action=action, reason=reason, data=data or {})


def audit_sequence(*, limit: int = 2000) -> int:
    """Number the committed audit rows not numbered yet, in that order; return the last number.

    Rows still inside an open transaction are not visible here, so they get a later number
    when they commit: a reader resuming after number N never meets a new row below N.
    """
    with transaction.atomic():
        # The UPDATE comes first: it takes the row lock (PostgreSQL) or the write lock
        # (SQLite) before the SELECTs, so numberings run one at a time and each sees every
        # row committed before it held the lock.
        if not AuditSequence.objects.filter(pk=1).update(last_seq=F("last_seq")):
            _sequence_create()
        head = AuditSequence.objects.get(pk=1)
        ids = list(Intervention.objects.filter(seq__isnull=True).order_by("id")
                   .values_list("id", flat=True)[:limit])
        if not ids:
            return head.last_seq
        rows = [Intervention(pk=pk, seq=head.last_seq + n) for n, pk in enumerate(ids, 1)]
        Intervention.objects.bulk_update(rows, ["seq"], batch_size=500)
        head.last_seq += len(ids)
        head.save(update_fields=["last_seq"])
        return head.last_seq


def _sequence_create() -> None:
    """Create the numbering row (after a flush), starting past any number already given."""
    start = Intervention.objects.aggregate(m=Max("seq"))["m"] or 0
    AuditSequence.objects.bulk_create([AuditSequence(pk=1, last_seq=start)],
                                      ignore_conflicts=True)
    AuditSequence.objects.filter(pk=1).update(last_seq=F("last_seq"))
