"""The tool-call ledger: every call recorded before it leaves the process, with its attempts."""
from __future__ import annotations

from django.db import models
from django.db.models import Q

from ledger.statuses import Effect, Reversibility, ToolCallStatus, effect_class_of
from runs.models.team import default_team_id


class ToolCall(models.Model):
    """One tool call the model asked for; retries are attempts of the same call."""

    # Uniqueness as constraints, not unique=True: on PostgreSQL that also builds a LIKE index
    # per column, which no query uses and every ledger insert would pay for.
    tool_call_id = models.CharField(max_length=40)
    provider_call_id = models.CharField(max_length=200, blank=True)
    # toolcall_unique_run_key (run, idempotency_key) serves lookups by run: no FK index.
    # No database FK check on the three hottest inserts (events, ledger rows, attempts; each
    # cost ~13% of PostgreSQL's time per step, measured): their rows are written only in
    # the statement that updates and locks their run (runs.engine.runtime.unit_sql: every INSERT
    # selects FROM that UPDATE) or in an ORM transaction on an existing run, and runs are
    # deleted through the ORM, which cascades (tests/runs/test_unit_sql.py checks both).
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="ledger",
                            db_index=False, db_constraint=False)
    step_key = models.CharField(max_length=100)
    turn = models.PositiveIntegerField()
    index = models.PositiveSmallIntegerField(default=0)
    tool = models.CharField(max_length=100)
    args = models.JSONField(default=dict, blank=True)
    args_hash = models.CharField(max_length=64)
    approved_args = models.JSONField(null=True, blank=True)
    sealed_args = models.TextField(blank=True, help_text="sensitive arguments, encrypted")
    idempotency_key = models.CharField(max_length=64)
    generation = models.PositiveSmallIntegerField(
        default=1, help_text="1, or n when this redoes a write whose earlier call was "
                             "cancelled or undone (its key is then a new generation)")
    supersedes = models.CharField(max_length=40, blank=True,
                                  help_text="tool_call_id of the cancelled call this redoes")
    effect = models.CharField(max_length=8, choices=Effect.choices, default=Effect.READ)
    idempotent = models.BooleanField(default=False)
    probeable = models.BooleanField(default=False)
    reversibility = models.CharField(
        max_length=16, choices=Reversibility.choices, default=Reversibility.REVERSIBLE
    )
    status = models.CharField(
        max_length=24, choices=ToolCallStatus.choices, default=ToolCallStatus.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    retry_base = models.PositiveIntegerField(
        default=0, help_text="attempts made before an operator re-opened the call"
    )
    facts = models.JSONField(null=True, blank=True)
    summary = models.TextField(blank=True)
    artifact_sha256 = models.CharField(max_length=64, blank=True)
    missing_fields = models.JSONField(default=list, blank=True)
    error_class = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)
    not_before = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "turn", "index"]
        indexes = [
            # Only the concurrency cap asks by tool, and only for running calls: a call is
            # running for the length of a tool call, so this index stays tiny and a call
            # recorded already settled (an inline read) writes no entry here.
            models.Index(fields=["tool"], name="toolcall_tool_running",
                         condition=Q(status=ToolCallStatus.RUNNING)),
        ]
        constraints = [
            models.UniqueConstraint(fields=["tool_call_id"], name="toolcall_unique_id"),
            # A key hashes its run's id (ledger.keys), so unique per run is unique; leading
            # with the run, it also serves every lookup of a run's calls (by status, step...).
            models.UniqueConstraint(fields=["run", "idempotency_key"], name="toolcall_unique_run_key"),
            models.CheckConstraint(
                condition=Q(status__in=[s.value for s in ToolCallStatus]),
                name="toolcall_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(tool_call_id__startswith="tc_"), name="toolcall_id_format"
            ),
        ]

    @property
    def effect_class(self) -> str:
        """Return read / idempotent / reversible / irreversible / manual (as ToolSpec's)."""
        return effect_class_of(effect=self.effect, idempotent=self.idempotent,
                               reversibility=self.reversibility)

    def __str__(self) -> str:
        return f"{self.tool_call_id} {self.tool} ({self.status})"


class ToolAttempt(models.Model):
    """One attempt at executing a tool call."""

    # attempt_unique (tool_call, attempt) serves lookups by call: no separate FK index, and no
    # database FK check (see ToolCall.run).
    tool_call = models.ForeignKey(ToolCall, on_delete=models.CASCADE, related_name="attempt_rows",
                                  db_index=False, db_constraint=False)
    attempt = models.PositiveIntegerField()
    status = models.CharField(max_length=24, choices=ToolCallStatus.choices)
    worker = models.CharField(max_length=100, blank=True)
    error_class = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)
    log_sha256 = models.CharField(max_length=64, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["tool_call", "attempt"]
        constraints = [
            models.UniqueConstraint(fields=["tool_call", "attempt"], name="attempt_unique"),
            models.CheckConstraint(condition=Q(attempt__gte=1), name="attempt_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.tool_call_id}#{self.attempt} ({self.status})"


class Artifact(models.Model):
    """Content-addressed bytes (large tool output, logs, reports) in the artifacts storage."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    size = models.BigIntegerField()
    content_type = models.CharField(max_length=100, default="application/octet-stream")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(size__gte=0), name="artifact_size")]

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.size} B)"


class ToolLimit(models.Model):
    """A team's limits for one tool, and the circuit-breaker state of its calls in that team."""

    team = models.ForeignKey("runs.Team", on_delete=models.PROTECT, related_name="tool_limits",
                             default=default_team_id)
    tool = models.CharField(max_length=100)
    concurrency = models.PositiveIntegerField(null=True, blank=True)
    rate_per_minute = models.PositiveIntegerField(null=True, blank=True)
    breaker_threshold = models.PositiveIntegerField(default=5)
    breaker_cooldown_s = models.PositiveIntegerField(default=60)
    breaker_failures = models.PositiveIntegerField(default=0)
    breaker_opened_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(concurrency__isnull=True) | Q(concurrency__gt=0),
                name="toollimit_concurrency_positive",
            ),
            models.CheckConstraint(
                condition=Q(breaker_threshold__gt=0), name="toollimit_breaker_positive"
            ),
            models.UniqueConstraint(fields=["team", "tool"], name="toollimit_unique_per_team"),
        ]

    def __str__(self) -> str:
        return self.tool
