"""External signals sent to a run, kept until a wait consumes them."""
from __future__ import annotations

from django.db import models


class Signal(models.Model):
    """A named signal with a payload; ``key`` makes a duplicate delivery a no-op."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="signals")
    name = models.CharField(max_length=100)
    payload = models.JSONField(default=dict, blank=True)
    key = models.CharField(max_length=200, unique=True)
    received_at = models.DateTimeField(auto_now_add=True)
    consumed_seq = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["received_at", "id"]
        indexes = [models.Index(fields=["run", "name", "consumed_seq"], name="signal_pending")]

    def __str__(self) -> str:
        return f"{self.name} ({self.key})"
