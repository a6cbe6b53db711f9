"""Runs, steps, events, snapshots, signals, budgets and worker heartbeats in Django admin."""
from __future__ import annotations

from django.contrib import admin

from agentops.admin_readonly import ReadOnlyAdmin
from runs.models import BudgetPolicy, Event, Run, Signal, Snapshot, Step, WorkerHeartbeat


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    """Runs: status, agent, progress; resolve them in the console."""

    list_display = ("id", "agent_name", "agent_version", "status", "attention_reason",
                    "steps_done", "steps_total", "created_at")
    list_filter = ("status", "agent_name", "attention_reason")
    search_fields = ("id", "goal", "agent_name")
    date_hierarchy = "created_at"


@admin.register(Step)
class StepAdmin(ReadOnlyAdmin):
    """Steps of runs."""

    list_display = ("run", "position", "key", "status", "retry_count")
    list_filter = ("status",)
    search_fields = ("run__id", "key")


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    """The append-only event log."""

    list_display = ("run", "seq", "type", "actor", "tool_call_id", "at")
    list_filter = ("type",)
    search_fields = ("run__id", "tool_call_id", "key")


@admin.register(Snapshot)
class SnapshotAdmin(ReadOnlyAdmin):
    """Snapshots of reduced run state."""

    list_display = ("run", "seq", "phase", "size", "schema_version", "agent_version")
    exclude = ("state",)


@admin.register(Signal)
class SignalAdmin(ReadOnlyAdmin):
    """External signals sent to runs."""

    list_display = ("id", "run", "name")
    search_fields = ("run__id", "name")


@admin.register(BudgetPolicy)
class BudgetPolicyAdmin(ReadOnlyAdmin):
    """Per-team budget policies (edit them on the console's settings page or the API: audited)."""

    list_display = ("agent_name", "team", "max_tokens", "max_cost_micros", "max_seconds")


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(ReadOnlyAdmin):
    """Which worker processes reported recently."""

    list_display = ("name", "host", "pid", "seen_at")
