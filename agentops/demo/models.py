"""The sandbox outside world: one row per side effect the demo tools cause.

An idempotent tool records its effect under its idempotency key, and the partial unique
constraint makes a second row for the same (kind, key) impossible. A tool that is not
idempotent (an email) records a row per send, so a duplicate send shows as two rows.
"""
from __future__ import annotations

from django.db import models
from django.utils import timezone


class WorldEffect(models.Model):
    """A side effect that happened in the outside world."""

    kind = models.CharField(max_length=64)
    key = models.CharField(max_length=200)
    run_id = models.CharField(max_length=64, db_index=True)
    data = models.JSONField(default=dict)
    idempotent = models.BooleanField(default=False)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "key"], condition=models.Q(idempotent=True),
                                    name="demo_effect_once_per_key"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.key}"
