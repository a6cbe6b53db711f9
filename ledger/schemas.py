"""API shapes of the ledger: tool calls (arguments redacted) and admins' tool limits."""
from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from ninja import Field, Schema

from agentops.strict import StrictIn


class ToolCallOut(Schema):
    """One tool call as the ledger holds it; sensitive arguments are stored redacted."""

    tool_call_id: str
    run_id: uuid.UUID
    step_key: str
    turn: int
    index: int
    tool: str
    args: dict[str, Any]
    approved_args: dict[str, Any] | None
    effect: str
    idempotent: bool
    reversibility: str
    generation: int = Field(description="1, or n for the n-th redo of a cancelled write")
    supersedes: str = Field(description="the cancelled call this one redoes, if any")
    status: str
    attempts: int
    facts: Any
    summary: str
    has_artifact: bool
    missing_fields: list[Any]
    error_class: str
    error: str
    created_at: dt.datetime
    updated_at: dt.datetime
    finished_at: dt.datetime | None

    @staticmethod
    def resolve_has_artifact(obj: Any) -> bool:
        """Return True when the full result is stored as an artifact."""
        return bool(obj.artifact_sha256)


class ToolCallDetailOut(ToolCallOut):
    """A tool call, with its full result when asked for with ``expand=true``."""

    result: Any = None
    result_content_type: str | None = None


class ToolLimitOut(Schema):
    """A team's limits of one tool and its circuit breaker (for that team's calls)."""

    team: str = Field(..., alias="team.slug")
    tool: str
    concurrency: int | None
    rate_per_minute: int | None
    breaker_threshold: int
    breaker_cooldown_s: int
    breaker_failures: int
    breaker_opened_at: dt.datetime | None
    updated_at: dt.datetime


class ToolLimitIn(StrictIn):
    """New limits of a tool (fields left out keep their value; null = no limit)."""

    concurrency: int | None = Field(None, gt=0, le=10_000)
    rate_per_minute: int | None = Field(None, gt=0, le=10**7)
    breaker_threshold: int | None = Field(None, gt=0, le=10_000)
    breaker_cooldown_s: int | None = Field(None, ge=0, le=10**7)
