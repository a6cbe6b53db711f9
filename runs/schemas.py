"""API shapes of runs: what callers send to start and steer runs, and what they read back."""
from __future__ import annotations

import datetime as dt
import uuid
from typing import Annotated, Any, Literal, Union

from ninja import Field, Schema
from pydantic import ConfigDict, Strict, create_model

from agentops.strict import Instant, StrictIn
from approvals.actions import BULK_ACTIONS, RUN_ACTIONS
from approvals.recommend.precedent import Precedent, precedent_read
from approvals.recommend.same_failure import SameFailure, same_failure
from runs.selectors import run_exceptions
from runs.stands import run_what_stands
from runs.engine.runtime.world import world_change_last
from runs.schemas_outcome import (PrecedentOut, RunExceptionOut, SameFailureOut, WhatStandsOut,
                                 WorldChangedOut)
from runs.statuses import BlockReason, RunStatus

Text200 = Field(min_length=1, max_length=200)


class BudgetIn(StrictIn):
    """Per-run limits that override the agent's and the admins' defaults (None = keep)."""

    # A misspelt limit ("token") would otherwise be dropped and the run go unlimited.
    model_config = ConfigDict(strict=True, extra="forbid")

    tokens: int | None = Field(None, gt=0, le=10**12)
    model_calls: int | None = Field(None, gt=0, le=10**9)
    tool_calls: int | None = Field(None, gt=0, le=10**9)
    cost_micros: int | None = Field(None, gt=0, le=10**15)


class RunCreateIn(StrictIn):
    """Start a run of a registered agent."""

    # An unknown field is refused (422 naming it), never silently dropped.
    model_config = ConfigDict(strict=True, extra="forbid")

    agent: str = Field(min_length=1, max_length=100)
    goal: str = Field(min_length=1, max_length=20_000)
    input: dict[str, Any] = Field(default_factory=dict)
    budget: BudgetIn | None = None
    constraints: list[str] = Field(default_factory=list, max_length=50,
                                   description="pinned rules the model always sees")
    team: str | None = Field(None, min_length=1, max_length=50,
                             description="the owning team's slug; required when you operate "
                                         "in several teams (GET /api/teams lists yours)")


class RunSummaryOut(Schema):
    """A run as a list row."""

    id: uuid.UUID
    team: str = Field(description="the slug of the team that owns the run")
    agent: str
    agent_version: str
    goal: str
    status: RunStatus
    wait_kind: str
    attention_reason: str
    recommended_action: str
    current_step: str
    steps_total: int
    steps_done: int
    last_seq: int
    exceptions_count: int = Field(description="exceptions an ended run carries")
    created_at: dt.datetime
    updated_at: dt.datetime

    @staticmethod
    def resolve_agent(obj: Any) -> str:
        """Return the agent name."""
        return obj.agent_name

    @staticmethod
    def resolve_team(obj: Any) -> str:
        """Return the owning team's slug."""
        return obj.team.slug

    @staticmethod
    def resolve_exceptions_count(obj: Any) -> int:
        """Return how many exceptions the run ended with."""
        return len(obj.exceptions or [])


class RunOut(RunSummaryOut):
    """A run with its whole projection: waits, attention, usage against budgets."""

    input: dict[str, Any]
    wait_until: dt.datetime | None
    wait_data: dict[str, Any]
    attention_detail: str
    recommendation_why: str
    recommended_alternatives: list[str]
    cancel_requested: bool
    current_tool_call: str
    tokens_used: int
    model_calls: int
    tool_calls: int
    cost_micros: int
    budget_tokens: int | None
    budget_model_calls: int | None
    budget_tool_calls: int | None
    budget_cost_micros: int | None
    deadline: dt.datetime | None
    recoveries: int
    recovery_limit: int
    failure_limit: int | None
    on_deadline: str
    parent_id: uuid.UUID | None
    forked_from_id: uuid.UUID | None
    forked_at_seq: int | None
    restarted_from_id: uuid.UUID | None = Field(
        None, description="the run this one restarted from its input (it ended 'restarted as')")
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    exceptions: list[RunExceptionOut] = Field(
        description="a completed_with_exceptions run's list; so far, for a live run")
    same_failure: SameFailureOut | None = Field(
        None, description="a blocked run's group: other runs blocked on the same tool the "
                          "same way (one decision for all)")

    precedent: PrecedentOut | None = Field(
        None, description="a stuck run's evidence: what operators chose the last times a run "
                          "stopped the same way, and how those runs ended")

    @staticmethod
    def resolve_precedent(obj: Any) -> Precedent | None:
        """Return the last choices made on runs stopped like this one."""
        return precedent_read(run=obj)

    @staticmethod
    def resolve_same_failure(obj: Any) -> SameFailure | None:
        """Return the other runs blocked like this one, counted now."""
        return same_failure(run=obj)

    what_stands: WhatStandsOut | None = Field(
        description="an ended run's ending and what it left in the world; null while live "
                    "or after a clean success")
    world_changed: WorldChangedOut | None = Field(
        None, description="a run blocked world_changed: what changed while it waited, before "
                          "and now (its requester's right to run it, resource versions)")

    @staticmethod
    def resolve_world_changed(obj: Any) -> dict[str, Any] | None:
        """Return the changes found by the re-check that blocked the run."""
        return world_change_last(obj)

    @staticmethod
    def resolve_exceptions(obj: Any) -> list[dict[str, Any]]:
        """Return the ended run's exceptions, or those it has gathered so far."""
        return run_exceptions(run=obj)

    @staticmethod
    def resolve_what_stands(obj: Any) -> dict[str, Any] | None:
        """Return what stands after the run ended (the run page's panel says the same)."""
        return run_what_stands(run=obj)


class RunPageOut(Schema):
    """One page of runs; pass ``next_cursor`` as ``cursor`` for the next one."""

    items: list[RunSummaryOut]
    next_cursor: str | None


class RunFiltersIn(Schema):
    """Filters of the run list (all optional, combined with AND)."""

    status: list[RunStatus] = Field(default_factory=list)
    agent: str = Field("", max_length=100)
    team: str = Field("", max_length=50, description="only runs of this team (its slug)")
    reason: BlockReason | None = None
    text: str = Field("", max_length=200, description="goal contains, or an exact run id")
    created_after: Instant | None = None
    created_before: Instant | None = None


class StepOut(Schema):
    """One plan step."""

    key: str
    position: int
    title: str
    depends_on: list[str]
    status: str
    retry_count: int
    input: dict[str, Any]
    output: Any
    error_class: str
    error: str
    started_at: dt.datetime | None
    finished_at: dt.datetime | None


class EventOut(Schema):
    """One fact of a run's log."""

    seq: int
    type: str
    data: dict[str, Any]
    tool_call_id: str
    attempt: int | None
    actor: str
    caused_by: str = Field(description="why it happened: seq:N (an earlier event of this run) "
                           "or a root: start:<who>, action:<id> (an operator's action; its "
                           "Intervention row's data.cause), recovery:<lost worker>, "
                           "signal:<name>; '' for events written before causes were kept")
    schema_version: int
    at: dt.datetime


class EventPageOut(Schema):
    """Events after a seq; pass ``last_seq`` as ``after_seq`` to read on."""

    items: list[EventOut]
    last_seq: int
    has_more: bool


class SnapshotOut(Schema):
    """A snapshot's header (its state is read one at a time)."""

    seq: int
    phase: str
    size: int
    sha256: str
    schema_version: int
    agent_version: str
    at: dt.datetime


class SnapshotStateOut(SnapshotOut):
    """A snapshot with its full reduced state."""

    state: dict[str, Any]


_WORDS = ", ".join(f"{a.verb} (\"{a.confirm_word}\")" for a in RUN_ACTIONS.values()
                   if a.confirm_word)
_CONFIRM = Field("", max_length=100, description=(
    f"actions that cannot be undone run only with their word typed here, or the amount they "
    f"move: {_WORDS}; without it the answer is 422 confirmation_required"))


class CancelIn(StrictIn):
    """Why the run is cancelled (required: kept in the audit log)."""

    reason: str = Field(min_length=1, max_length=2000)
    confirm: str = _CONFIRM


class ForkIn(StrictIn):
    """Fork a new run from this run's state after event ``seq``."""

    seq: int = Field(ge=1, le=2**62)


class SignalIn(StrictIn):
    """Send a named signal; a second delivery with the same ``key`` is a no-op."""

    name: str = Field(min_length=1, max_length=100)
    payload: dict[str, Any] = Field(default_factory=dict)
    key: str = Field(min_length=1, max_length=200)


class SignalOut(Schema):
    """A signal as stored."""

    id: int
    name: str
    payload: dict[str, Any]
    key: str
    received_at: dt.datetime
    consumed_seq: int | None


RunVerb = Literal[tuple(RUN_ACTIONS)]  # type: ignore[valid-type]
BulkVerb = Literal[tuple(BULK_ACTIONS)]  # type: ignore[valid-type]


class _ActionInBase(StrictIn):
    reason: str = Field(min_length=1, max_length=2000)
    confirm: str = _CONFIRM


class _PreviewInBase(StrictIn):
    pass


def _action_in(action: Any, base: type[Schema] = _ActionInBase,
               suffix: str = "ActionIn") -> type[Schema]:
    """Return the request body of one action: its verb, a reason and its own params schema."""
    camel = "".join(w.capitalize() for w in action.verb.split("_"))
    return create_model(
        f"{camel}{suffix}", __base__=base, __doc__=f"{action.label}: {action.help}",
        action=(Literal[action.verb], ...),
        params=(action.params, Field(default_factory=action.params,
                                     description=action.params.__doc__ or "")))


# One body per action, told apart by ``action``: OpenAPI shows each action's own params.
ActionIn = Annotated[Union[tuple(_action_in(a) for a in RUN_ACTIONS.values())],  # noqa: UP007
                     Field(discriminator="action")]
# The same bodies without reason or confirmation: what the action would do, before pressing.
ActionPreviewIn = Annotated[Union[tuple(_action_in(a, _PreviewInBase, "PreviewIn")  # noqa: UP007
                                        for a in RUN_ACTIONS.values())],
                            Field(discriminator="action")]


class ActionPreviewOut(Schema):
    """What an action would do to this run: refused (why), or its lines, plan diff and word."""

    action: str
    refusal: str
    calls: list[dict[str, Any]]
    diff: list[dict[str, Any]]
    confirm: str = Field(description="the word to type in ``confirm`` (\"\": none needed)")


class BulkActionIn(StrictIn):
    """One action on many runs: by ids or by a filter (exactly one), with a required reason.

    ``preview`` changes nothing: it returns the count and, for the first runs, what the
    action would do to each of their tool calls (the same lines the console's dialog shows).
    """

    action: BulkVerb
    reason: str = Field(min_length=1, max_length=2000)
    run_ids: list[Annotated[uuid.UUID, Strict(False)]] | None = Field(None, max_length=1000)
    filter: RunFiltersIn | None = None
    preview: bool = False
    confirm: str = _CONFIRM


class BulkResultOut(Schema):
    """What happened to one run of a bulk action."""

    run_id: str
    outcome: str
    detail: str = ""


class ConsequenceOut(Schema):
    """What the action does to one tool call in the world (approvals.consequences)."""

    tool_call_id: str
    tool: str
    step: str
    status: str
    effect_class: str
    kind: str = ""
    will: str
    key: str = ""
    consequence: dict[str, Any] = {}


class BulkPreviewOut(Schema):
    """One selected run in a preview: why it would be refused, or each call's consequence."""

    run_id: str
    refusal: str = ""
    calls: list[ConsequenceOut] = []


class BulkActionOut(Schema):
    """How many runs the selection holds, and each run's result (or, previewing, what the
    action would do to each of the first runs' tool calls)."""

    count: int
    results: list[BulkResultOut]
    previews: list[BulkPreviewOut] = []


class ActionOut(Schema):
    """What an action changed, and the run as it is now."""

    action: str
    changes: dict[str, Any]
    run: RunOut
