"""API shapes of budget policies: the default limits an admin sets per agent or for all."""
from __future__ import annotations

import datetime as dt
from typing import Literal

from ninja import Field, Schema

from agentops.strict import StrictIn


class BudgetPolicyOut(Schema):
    """A team's default limits; ``agent_name`` empty is the team's policy for every agent."""

    id: int
    team: str = Field(..., alias="team.slug")
    agent_name: str
    max_tokens: int | None
    max_model_calls: int | None
    max_tool_calls: int | None
    max_cost_micros: int | None
    max_seconds: int | None
    recovery_limit: int
    step_retry_limit: int
    run_failure_limit: int | None
    on_deadline: str
    updated_at: dt.datetime


class BudgetPolicyIn(StrictIn):
    """New values of a budget policy (fields left out keep their value)."""

    max_tokens: int | None = Field(None, gt=0, le=10**12)
    max_model_calls: int | None = Field(None, gt=0, le=10**9)
    max_tool_calls: int | None = Field(None, gt=0, le=10**9)
    max_cost_micros: int | None = Field(None, gt=0, le=10**15)
    max_seconds: int | None = Field(None, gt=0, le=10**8)
    recovery_limit: int | None = Field(None, ge=0, le=1000)
    step_retry_limit: int | None = Field(None, ge=0, le=1000)
    run_failure_limit: int | None = Field(None, gt=0, le=10**6)
    on_deadline: Literal["block", "terminate"] | None = None


class BudgetPolicyCreateIn(BudgetPolicyIn):
    """A new policy of a team for one agent (empty name = for every agent of the team)."""

    agent_name: str = Field("", max_length=100)
    team: str | None = Field(None, max_length=50, description=(
        "the team's slug; left out: the only team you administer (installation admins: "
        "the default team)"))
