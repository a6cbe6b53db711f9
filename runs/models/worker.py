"""Worker heartbeats: which worker processes are alive, for /readyz and the console."""
from __future__ import annotations

from django.db import models


class WorkerHeartbeat(models.Model):
    """The last time a worker process (qcluster or sweeper) said it was alive."""

    name = models.CharField(max_length=100, unique=True)
    host = models.CharField(max_length=200, blank=True)
    pid = models.PositiveIntegerField(default=0)
    seen_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.name
