"""API shapes of approvals and API keys."""
from __future__ import annotations

import datetime as dt
import uuid
from typing import Any, Literal

from ninja import Field, Schema

from agentops.strict import Instant, StrictIn
from approvals.statuses import ApprovalStatus
from approvals.votes import votes_counted


class ApprovalOut(Schema):
    """A request for a person to approve one tool call with exact arguments."""

    id: int
    run_id: uuid.UUID
    tool_call_id: str
    status: ApprovalStatus
    tool: str
    proposed_args: dict[str, Any]
    approved_args: dict[str, Any] | None
    risk: str
    why: str
    state_seq: int
    decided_by: str | None
    decided_at: dt.datetime | None
    reason: str
    expires_at: dt.datetime | None
    expiry_outcome: str
    escalated: bool
    created_at: dt.datetime
    approvers_required: int = Field(description="distinct people who must approve")
    version: int = Field(description="bumped when the arguments to approve change")
    approvals: int = Field(description="approvals of the current version so far")

    @staticmethod
    def resolve_approvals(obj: Any) -> int:
        """Return the approvals that count (0 or 1 without the two-person rule)."""
        if obj.approvers_required > 1:
            return votes_counted(obj)
        return 1 if obj.status == "approved" else 0

    @staticmethod
    def resolve_tool_call_id(obj: Any) -> str:
        """Return the ledger id of the call (not the row id)."""
        return obj.tool_call.tool_call_id

    @staticmethod
    def resolve_decided_by(obj: Any) -> str | None:
        """Return who decided, by username."""
        return obj.decided_by.get_username() if obj.decided_by else None


class ApprovalPageOut(Schema):
    """One page of approvals; pass ``next_cursor`` as ``cursor`` for the next one."""

    items: list[ApprovalOut]
    next_cursor: str | None


class ApprovalFiltersIn(Schema):
    """Filters of the approval list (all optional)."""

    status: ApprovalStatus | None = None
    run_id: uuid.UUID | None = None
    tool: str = Field("", max_length=100)


class DecisionIn(StrictIn):
    """Approve, reject, or approve with edited arguments."""

    decision: Literal["approve", "reject", "edit"]
    reason: str = Field("", max_length=2000)
    args: dict[str, Any] | None = Field(None, description="the edited arguments (edit only)")
    confirm: str = Field("", max_length=100, description=(
        "a high-risk approval (risk high/critical, an irreversible or money-moving write) is "
        "approved only with its amount or the word \"approve\" here"))


class ApiKeyIn(StrictIn):
    """A new key: its name, the team it acts in, its role there, and when it expires."""

    name: str = Field(min_length=1, max_length=100)
    team: str = Field(min_length=1, max_length=100, description="the team's slug")
    role: Literal["viewers", "operators", "support", "admins"] = Field(
        description="never above the role you hold in that team")
    expires_at: Instant | None = Field(None, strict=False,
                                            description="with a time zone; empty: never expires")


class ApiKeyRotateIn(StrictIn):
    """How long the old secret keeps working after the rotation (0: it stops now)."""

    grace_s: int = Field(0, ge=0, le=7 * 24 * 3600)


class ApiKeyOut(Schema):
    """A key as listed: never the secret."""

    id: int
    name: str
    prefix: str
    team: str | None = Field(None, description="the team's slug")
    role: str
    created_at: dt.datetime
    expires_at: dt.datetime | None
    rotated_at: dt.datetime | None
    last_used_at: dt.datetime | None
    revoked_at: dt.datetime | None

    @staticmethod
    def resolve_team(obj: Any) -> str | None:
        """Return the team's slug."""
        return obj.team.slug if obj.team_id else None


class ApiKeyCreatedOut(ApiKeyOut):
    """A new key: ``key`` is shown this once and cannot be read again."""

    key: str
