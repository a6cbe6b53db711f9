"""The Run: the projection of a run's event log that the console and the workers query."""
from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from runs.models.team import default_team_id
from runs.statuses import ATTENTION, STUCK, TERMINAL, BlockReason, RunStatus, WaitKind


class Run(models.Model):
    """One agent run. Every column here is derived from events, updated with them."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    agent_name = models.CharField(max_length=100)
    agent_version = models.CharField(max_length=50)
    goal = models.TextField()
    input = models.JSONField(default=dict, blank=True)

    status = models.CharField(max_length=32, choices=RunStatus.choices, default=RunStatus.QUEUED)
    wait_kind = models.CharField(max_length=16, choices=WaitKind.choices, blank=True)
    wait_until = models.DateTimeField(null=True, blank=True)
    wait_data = models.JSONField(default=dict, blank=True)
    attention_reason = models.CharField(max_length=32, choices=BlockReason.choices, blank=True)
    attention_detail = models.TextField(blank=True)
    attention_signature = models.CharField(max_length=64, blank=True)
    recommended_action = models.CharField(max_length=32, blank=True)
    recommendation_why = models.CharField(max_length=500, blank=True)
    recommended_alternatives = models.JSONField(default=list, blank=True)
    cancel_requested = models.BooleanField(default=False)
    exceptions = models.JSONField(
        default=list, blank=True,
        help_text="what kept an ended run from a clean success: what, who, when, why")

    current_step = models.CharField(max_length=100, blank=True)
    current_tool_call = models.CharField(max_length=40, blank=True)
    steps_total = models.PositiveIntegerField(default=0)
    steps_done = models.PositiveIntegerField(default=0)
    plan_version = models.PositiveIntegerField(default=0)

    tokens_used = models.BigIntegerField(default=0)
    model_calls = models.PositiveIntegerField(default=0)
    tool_calls = models.PositiveIntegerField(default=0)
    cost_micros = models.BigIntegerField(default=0)
    budget_tokens = models.BigIntegerField(null=True, blank=True)
    budget_model_calls = models.PositiveIntegerField(null=True, blank=True)
    budget_tool_calls = models.PositiveIntegerField(null=True, blank=True)
    budget_cost_micros = models.BigIntegerField(null=True, blank=True)
    deadline = models.DateTimeField(null=True, blank=True)

    recoveries = models.PositiveIntegerField(default=0)
    recovery_limit = models.PositiveIntegerField(default=5)
    # Automatic retries of one step before it blocks; null = AGENTOPS_STEP_RETRY_LIMIT.
    step_retry_limit = models.PositiveIntegerField(null=True, blank=True)
    # Failed attempts across all steps before it blocks; null = AGENTOPS_RUN_FAILURE_LIMIT.
    failure_limit = models.PositiveIntegerField(null=True, blank=True)
    # Past the deadline: block (for a person) or terminate; "" = AGENTOPS_DEADLINE_POLICY.
    on_deadline = models.CharField(max_length=10, blank=True, default="")
    last_seq = models.BigIntegerField(default=0)
    version = models.BigIntegerField(default=0)
    lease_owner = models.CharField(max_length=100, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    urgent = models.BooleanField(
        default=False, help_text="queued after losing its worker: busy workers yield to it")

    # The team that owns the run (a child inherits its parent's): who may see and act on it.
    # No index of its own: run_team_agent (team, agent_name) serves lookups by team.
    team = models.ForeignKey("runs.Team", on_delete=models.PROTECT, related_name="runs",
                             default=default_team_id, db_index=False)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    forked_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks"
    )
    forked_at_seq = models.BigIntegerField(null=True, blank=True)
    restarted_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="restarts",
        help_text="the run this one restarted from its input (that one ended 'restarted as')")
    idempotency_key = models.CharField(max_length=200, null=True, blank=True, unique=True)
    request_hash = models.CharField(max_length=64, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [
            models.Index(fields=["status", "-updated_at"], name="run_status_updated"),
            models.Index(
                fields=["status", "updated_at"],
                name="run_attention_queue",
                condition=Q(status__in=sorted(s.value for s in ATTENTION)),
            ),
            models.Index(
                fields=["wait_until"],
                name="run_wait_due",
                condition=Q(status=RunStatus.WAITING),
            ),
            models.Index(
                fields=["status", "wait_kind"],
                include=["id"],
                name="run_attention_counts",
                condition=Q(status__in=sorted(s.value for s in ATTENTION)),
            ),
            models.Index(
                fields=["updated_at"],
                name="run_urgent_queued",
                condition=Q(status=RunStatus.QUEUED, urgent=True),
            ),
            # Decide-and-next (runs.triage): the oldest stuck run after this one. Without it
            # the walk filters the whole history by status, oldest first (1.2 s at 500k runs).
            models.Index(
                fields=["updated_at", "id"],
                name="run_stuck_order",
                condition=Q(status__in=sorted(s.value for s in STUCK)),
            ),
            models.Index(fields=["agent_name", "-updated_at"], name="run_agent_updated"),
            # A team's agent names by index probes (runs.selectors_lists.run_agent_names).
            models.Index(fields=["team", "agent_name"], name="run_team_agent"),
            models.Index(fields=["attention_signature"], name="run_signature"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=[s.value for s in RunStatus]), name="run_status_valid"
            ),
            models.CheckConstraint(condition=Q(last_seq__gte=0), name="run_last_seq_nonneg"),
            models.CheckConstraint(
                condition=~Q(status=RunStatus.WAITING) | ~Q(wait_kind=""),
                name="run_waiting_has_kind",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.agent_name} {str(self.id)[:8]} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        """Return True when the run has ended."""
        return self.status in TERMINAL

    @property
    def needs_attention(self) -> bool:
        """Return True when the run is waiting, blocked or unknown."""
        return self.status in ATTENTION


def run_id_text(run: Run) -> str:
    """Return ``str(run.pk)``, made once per instance (the engine writes it several times a
    step: a UUID's ``__str__`` formats all 32 digits each time). Kept with the id it was made
    from, so an instance whose id is changed gets the new text."""
    state = run.__dict__
    pk = state.get("id")
    made = state.get("_id_text")
    if made is None or made[0] is not pk or pk is None:
        made = state["_id_text"] = (pk, str(run.pk))
    return made[1]
