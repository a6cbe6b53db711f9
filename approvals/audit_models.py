"""Records of the audit trail's export: the numbering lock and each sink's progress.

Imported by approvals.models, so Django registers them under the ``approvals`` app.
"""
from __future__ import annotations

from django.db import models


class AuditSequence(models.Model):
    """The one row that makes numbering audit rows serial (approvals.audit.audit_sequence).

    Ids are handed out at insert, but transactions commit in any order, so a reader resuming
    after id N could miss a row with a lower id that committed later. Rows are numbered
    (``Intervention.seq``) after they commit, under this row's lock, in the order numbering
    finds them: a reader that resumes after seq N misses nothing and sees nothing twice.
    """

    last_seq = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"audit rows numbered up to {self.last_seq}"


class AuditSinkCursor(models.Model):
    """How far one sink (AGENTOPS_AUDIT_SINK) has received the audit trail: its outbox.

    The audit table is append-only and numbered, so the stream needs no row per message:
    every audit row past ``last_seq`` is owed to the sink. A worker claims the cursor,
    sends the next rows in order, and moves ``last_seq`` past each one the sink accepted.
    """

    sink = models.CharField(max_length=300, unique=True, help_text="the sink's address")
    last_seq = models.BigIntegerField(default=0)
    failures = models.PositiveIntegerField(default=0, help_text="failed tries of the next row")
    next_at = models.DateTimeField(null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=200, blank=True)
    last_error = models.TextField(blank=True)
    last_sent_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"audit sink {self.sink} at {self.last_seq}"
