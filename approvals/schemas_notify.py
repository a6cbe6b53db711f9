"""API shapes of notification routing rules and the delivery log."""
from __future__ import annotations

import datetime as dt
import uuid
from typing import Literal

from ninja import Field, Schema

from agentops.strict import StrictIn
from approvals.statuses import AttemptStatus, DeliveryStatus, NotifyStage


class NotifyRuleIn(StrictIn):
    """A routing rule; blank match fields match anything, groups are given by name."""

    team: str | None = Field(None, max_length=50, description=(
        "the team whose runs it routes (slug); left out: a new rule goes to the only team "
        "you administer (installation admins: the default team), a changed one stays"))
    name: str = Field(..., min_length=1, max_length=100)
    order: int = Field(100, ge=0, le=1_000_000)
    enabled: bool = True
    subject: Literal["approval", "stuck"] | None = Field(
        None, description="approval, stuck, or null for both")
    agent: str = Field("", max_length=100)
    tool: str = Field("", max_length=100)
    risk: str = Field("", max_length=16)
    failure_class: str = Field("", max_length=60)
    group: str | None = Field(None, description="the group assigned and reached")
    channel: str = Field(..., min_length=1, max_length=60,
                         description="a channel declared in AGENTOPS_NOTIFY_CHANNELS")
    sla_s: int = Field(0, ge=0, le=30 * 86400, description="0: no reminder or escalation")
    escalate_to: str | None = Field(None, description="the next group, once the SLA passes twice")


class NotifyRuleOut(Schema):
    """A routing rule as stored."""

    id: int
    team: str = Field(..., alias="team.slug")
    name: str
    order: int
    enabled: bool
    subject: str
    agent: str
    tool: str
    risk: str
    failure_class: str
    group: str | None = Field(None, alias="group.name")
    channel: str
    sla_s: int
    escalate_to: str | None = Field(None, alias="escalate_to.name")


class AttemptOut(Schema):
    """One try to send a delivery."""

    n: int
    status: AttemptStatus
    worker: str
    started_at: dt.datetime
    finished_at: dt.datetime | None
    response: str
    error: str


class DeliveryOut(Schema):
    """One message to one recipient, with every attempt."""

    id: int
    key: str
    run_id: uuid.UUID
    approval_id: int | None
    stage: NotifyStage
    channel: str
    recipient: str
    group_name: str
    status: DeliveryStatus
    attempts: int
    next_at: dt.datetime
    sent_at: dt.datetime | None
    last_error: str
    tries: list[AttemptOut] = Field(..., alias="attempt_rows")
