"""API schemas for what stands after a run, the evidence beside a stopped run's advice and
why an event happened."""
from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from ninja import Field, Schema

from runs.statuses import RunStatus


class RunExceptionOut(Schema):
    """One thing that kept a run from a clean success: what, who, when, why."""

    kind: str
    what: str
    who: str
    when: str
    why: str
    step: str = ""
    tool: str = ""
    tool_call_id: str = ""


class StandingEffectOut(Schema):
    """One write of an ended run and where it stands in the world."""

    tool: str
    tool_call_id: str
    key: str = Field(description="the call's idempotency key")
    amount: str = Field(description='the money it moves, as its arguments spell it ("60 EUR")')
    status: str
    reversibility: str
    outcome: Literal["stands", "compensated", "unconfirmed", "never_ran"]
    step: str


class NotDoneStepOut(Schema):
    """A plan step an ended run did not do."""

    key: str
    title: str
    status: str


class WhatStandsOut(Schema):
    """What an ended run (cancelled, failed, completed with exceptions) left in the world."""

    status: RunStatus
    ended_by: str
    ended_at: dt.datetime | None
    why: str
    standing: list[StandingEffectOut] = Field(description="writes that still stand")
    compensated: list[StandingEffectOut] = Field(description="writes undone by compensation")
    unconfirmed: list[StandingEffectOut] = Field(
        description="writes that may or may not have happened; nobody confirmed them")
    not_done: list[NotDoneStepOut]


class SameFailureOut(Schema):
    """Other runs blocked now on the same tool with the same failure meaning."""

    tool: str
    category: str
    others: int = Field(description="other runs blocked the same way, now")
    run_ids: list[str] = Field(description="this run and the others (oldest first, capped)")
    verb: str = Field(description="the recommended bulk verb, empty when it has none")
    text: str
    bulk_url: str = Field(description="the console's bulk form with all of them")


class ChoiceOut(Schema):
    """One action operators pressed on runs stopped the same way, and how many then finished."""

    action: str = Field(description="dotted audit name, e.g. run.retry")
    verb: str
    runs: int
    finished: int = Field(description="of those runs, how many ended succeeded or completed "
                                      "with exceptions")


class PrecedentOut(Schema):
    """What operators chose the last times a run stopped like this one (newest 20 presses)."""

    signature: str = Field(description="failure meaning and tool, e.g. credentials:carrier")
    runs: int
    choices: list[ChoiceOut]
    text: str


class CauseLinkOut(Schema):
    """One event of a cause chain."""

    seq: int
    type: str
    caused_by: str
    actor: str
    at: dt.datetime


class CauseChainOut(Schema):
    """Why event ``seq`` happened: it and its causes (nearest first), then the root."""

    seq: int
    links: list[CauseLinkOut]
    hidden: int = Field(description="links left out between the last shown and the root's event")
    root_kind: str = Field(description="start | action | recovery | signal | '' (not recorded)")
    root_text: str
    root: dict[str, Any] = Field(description="the root's audit row (an action's Intervention)")


class WorldChangeOut(Schema):
    """One thing that changed while a run waited."""

    kind: Literal["permission", "version"]
    subject: str = Field(description="the requester's username, or the tool")
    what: str
    before: str
    now: str


class WorldChangedOut(Schema):
    """The re-check that blocked a run (its world.changed event)."""

    seq: int
    at: dt.datetime
    why: str = Field(description="recovery | wait: what the run came back from")
    changes: list[WorldChangeOut]
