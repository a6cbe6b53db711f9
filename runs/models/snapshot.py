"""Snapshots: the full reduced state at a sequence number, so a load reads one row + a tail."""
from __future__ import annotations

from django.db import models

CURRENT_STATE_SCHEMA = 1


class Snapshot(models.Model):
    """The reduced state of a run after event ``seq``."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="snapshots")
    seq = models.BigIntegerField()
    phase = models.CharField(max_length=32)
    state = models.JSONField()
    size = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    schema_version = models.PositiveSmallIntegerField(default=CURRENT_STATE_SCHEMA)
    agent_version = models.CharField(max_length=50)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "-seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="snapshot_unique_seq")]

    def __str__(self) -> str:
        return f"snapshot @{self.seq} ({self.phase})"
