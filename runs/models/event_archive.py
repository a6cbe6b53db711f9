"""Where the events of a run whose partition was dropped live now: one object in S3."""
from __future__ import annotations

from django.db import models


class EventArchive(models.Model):
    """A run's archived event log: its object in the archive store and how to check it."""

    run_id = models.UUIDField(unique=True)
    run_month = models.DateField()
    object_key = models.CharField(max_length=300)
    sha256 = models.CharField(max_length=64)
    events = models.PositiveIntegerField()
    archived_at = models.DateTimeField()
    # Set when the events were read back into the event table (runs.event_archive).
    restored_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.run_id} -> {self.object_key}"
