"""The ledger in Django admin: tool calls, attempts, artifacts, tool limits (read-only)."""
from __future__ import annotations

from django.contrib import admin

from agentops.admin_readonly import ReadOnlyAdmin
from ledger.models import Artifact, ToolAttempt, ToolCall, ToolLimit


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    """Tool calls; sensitive arguments stay sealed (not shown)."""

    list_display = ("tool_call_id", "run", "step_key", "tool", "effect", "status", "attempts",
                    "created_at")
    list_filter = ("status", "effect", "tool")
    search_fields = ("tool_call_id", "run__id", "idempotency_key")
    exclude = ("sealed_args",)


@admin.register(ToolAttempt)
class ToolAttemptAdmin(ReadOnlyAdmin):
    """One row per attempt of a tool call."""

    list_display = ("tool_call", "attempt", "status")
    list_filter = ("status",)


@admin.register(Artifact)
class ArtifactAdmin(ReadOnlyAdmin):
    """Content-addressed artifacts."""


@admin.register(ToolLimit)
class ToolLimitAdmin(ReadOnlyAdmin):
    """Per-team tool limits (edit them on the console's settings page or the API: audited)."""

    list_display = ("tool", "team", "concurrency", "rate_per_minute", "breaker_opened_at")
