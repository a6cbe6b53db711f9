"""Budget policies set by admins: defaults for every run, or for one agent."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from runs.models.team import default_team_id


class BudgetPolicy(models.Model):
    """A team's default limits for its runs; blank ``agent_name`` = every agent. Null = no limit."""

    team = models.ForeignKey("runs.Team", on_delete=models.PROTECT,
                             related_name="budget_policies", default=default_team_id)
    agent_name = models.CharField(max_length=100, blank=True)
    max_tokens = models.BigIntegerField(null=True, blank=True)
    max_model_calls = models.PositiveIntegerField(null=True, blank=True)
    max_tool_calls = models.PositiveIntegerField(null=True, blank=True)
    max_cost_micros = models.BigIntegerField(null=True, blank=True)
    max_seconds = models.PositiveIntegerField(null=True, blank=True)
    recovery_limit = models.PositiveIntegerField(default=5)
    step_retry_limit = models.PositiveIntegerField(default=3)
    # Failed attempts across a run's steps before it blocks; null = AGENTOPS_RUN_FAILURE_LIMIT.
    run_failure_limit = models.PositiveIntegerField(null=True, blank=True)
    on_deadline = models.CharField(
        max_length=10, blank=True, default="",
        choices=[("", "(setting)"), ("block", "block"), ("terminate", "terminate")],
        help_text="Past max_seconds: block for a person or terminate; blank = the setting.")
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "budget policies"
        constraints = [
            models.CheckConstraint(
                condition=Q(max_tokens__isnull=True) | Q(max_tokens__gt=0),
                name="budget_tokens_positive",
            ),
            models.CheckConstraint(
                condition=Q(max_cost_micros__isnull=True) | Q(max_cost_micros__gt=0),
                name="budget_cost_positive",
            ),
            models.UniqueConstraint(fields=["team", "agent_name"],
                                    name="budget_policy_unique_per_team"),
        ]

    def __str__(self) -> str:
        return self.agent_name or "(every agent)"


class ModelPrice(models.Model):
    """What a model costs, in micro-dollars per million tokens; model "*" prices any other.

    Rows here override the AGENTOPS_MODEL_PRICES setting; the engine reads both (cached for a
    few seconds) to compute the cost of every model reply from its token usage.
    """

    model = models.CharField(max_length=200, unique=True)
    input_per_mtok_micros = models.BigIntegerField(
        help_text="micro-dollars per million prompt tokens (150000 = $0.15)")
    output_per_mtok_micros = models.BigIntegerField(
        help_text="micro-dollars per million completion tokens (600000 = $0.60)")
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(input_per_mtok_micros__gte=0) & Q(output_per_mtok_micros__gte=0),
                name="model_price_nonneg",
            ),
        ]

    def __str__(self) -> str:
        return self.model
