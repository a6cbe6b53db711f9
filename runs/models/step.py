"""A plan step of a run (the projection of step events)."""
from __future__ import annotations

from django.db import models
from django.db.models import Q

from runs.statuses import StepStatus


class Step(models.Model):
    """One step of a run's plan; an agent loop of model and tool calls."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="steps")
    key = models.CharField(max_length=100)
    position = models.PositiveIntegerField()
    title = models.CharField(max_length=200, blank=True)
    depends_on = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=StepStatus.choices, default=StepStatus.PENDING)
    retry_count = models.PositiveIntegerField(default=0)
    input = models.JSONField(default=dict, blank=True)
    output = models.JSONField(null=True, blank=True)
    error_class = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "position"]
        constraints = [
            models.UniqueConstraint(fields=["run", "key"], name="step_unique_key"),
            models.CheckConstraint(
                condition=Q(status__in=[s.value for s in StepStatus]), name="step_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.status})"
