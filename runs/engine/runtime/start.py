"""Create a run: its row, its planned steps and its run.created event, then enqueue its first tick.

The runtime starts child runs with it (waits); runs.services re-exports it for the console, the API
and the CLI.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import IntegrityError, transaction

from agentops.agents import registry
from agentops.causes import START, event_cause
from agentops.errors import InvalidInput
from agentops.jsonstate import check_json, sha256_json
from runs.engine.runtime.budgets import budget_defaults
from runs.engine.runtime.events import NewEvent, event_append
from runs.engine.runtime.queue import run_enqueue
from runs.errors import IdempotencyConflict
from runs.event_types import EventType
from runs.models import Run, Step, Team
from runs.models.team import default_team_id

_BUDGET_KEYS = {"tokens": "budget_tokens", "model_calls": "budget_model_calls",
                "tool_calls": "budget_tool_calls", "cost_micros": "budget_cost_micros"}


def run_start(*, agent: str, goal: str, input: dict[str, Any] | None = None,
              budget: dict[str, Any] | None = None, idempotency_key: str | None = None,
              actor: Any = None, parent: Run | None = None, constraints: list[str] | None = None,
              enqueue: bool = True, share: dict[str, Any] | None = None,
              restarted_from: Run | None = None, team: Team | None = None) -> Run:
    """Create a queued run of ``agent`` (its newest version) for ``team`` and enqueue it.
    The same ``idempotency_key`` returns the same run (a different body: IdempotencyConflict).
    ``enqueue=False`` leaves the first tick to the caller; ``share``: a child's share of its
    parent's budget. A child or a restart stays in its run's team; no team: the default team.
    """
    definition = registry.get(agent)
    payload = _request(agent, goal, input, budget, constraints)
    team_id = _team_id(team, parent or restarted_from)
    fields = _cap_by_share({**budget_defaults(agent_name=agent, agent_budget=definition.budget,
                                              team_id=team_id),
                            **_budget_overrides(budget or {})}, share or {})
    request_hash = sha256_json(payload)
    try:
        with transaction.atomic(), event_cause(f"{START}:{actor_name(actor)}"):
            run = Run.objects.create(
                agent_name=agent, agent_version=definition.version, goal=goal,
                input=input or {}, idempotency_key=idempotency_key, request_hash=request_hash,
                created_by=actor if getattr(actor, "pk", None) else None, parent=parent,
                restarted_from=restarted_from, team_id=team_id,
                **fields)
            plan = _steps_create(run, definition)
            event_append(run=run, events=[NewEvent(EventType.RUN_CREATED, {
                "agent": agent, "version": definition.version, "goal": goal,
                "input": input or {}, "constraints": constraints or [], "plan": plan,
                **_links(parent, restarted_from),
                **({"budget_share": share} if share else {}),
            }, actor=actor_name(actor))], fields={"steps_total": len(plan)})
            if enqueue:
                run_enqueue(run.pk)
    except IntegrityError:
        if not idempotency_key:
            raise
        return _same_request(idempotency_key, request_hash)
    return run


def _request(agent: str, goal: str, input: dict[str, Any] | None,
             budget: dict[str, Any] | None, constraints: list[str] | None) -> dict[str, Any]:
    """Return the request an idempotency key stands for, refusing a bad one."""
    payload = {"agent": agent, "goal": goal, "input": input or {}, "budget": budget or {},
               "constraints": constraints or []}
    check_json(payload, "$request")
    if not goal or not goal.strip():
        raise InvalidInput("goal must not be empty")
    return payload


def _team_id(team: Team | None, origin: Run | None) -> int:
    """Return the owning team's id: the origin run's (child, restart), else ``team``'s."""
    if origin is not None:
        return origin.team_id
    return team.pk if team is not None else default_team_id()


def _links(parent: Run | None, restarted_from: Run | None) -> dict[str, Any]:
    """Return the run.created fields naming the runs this one hangs off."""
    out: dict[str, Any] = {"parent": str(parent.pk) if parent else None}
    if restarted_from is not None:
        out["restarted_from"] = str(restarted_from.pk)
    return out


def _steps_create(run: Run, definition: Any) -> list[dict[str, Any]]:
    """Insert the run's planned steps; return the plan as JSON (for run.created)."""
    plan = [s.as_json() for s in definition.plan or () if not s.optional]
    Step.objects.bulk_create([Step(run=run, key=s["key"], position=i, title=s["title"],
                                   depends_on=s["depends_on"], input=s["input"])
                              for i, s in enumerate(plan)])
    return plan


def _same_request(idempotency_key: str, request_hash: str) -> Run:
    """Return the run created under ``idempotency_key``, or refuse a different body."""
    existing = Run.objects.get(idempotency_key=idempotency_key)
    if existing.request_hash != request_hash:
        raise IdempotencyConflict(
            "this Idempotency-Key was used for a different request", run_id=str(existing.pk)
        ) from None
    return existing


def _cap_by_share(fields: dict[str, Any], share: dict[str, Any]) -> dict[str, Any]:
    """Lower the run's limits to its share of the parent's budget (never raise them).

    The share is not part of the request an idempotency key stands for.
    """
    for column, value in share.items():
        if column == "deadline":
            value = dt.datetime.fromisoformat(value)
        fields[column] = value if fields.get(column) is None else min(fields[column], value)
    return fields


def _budget_overrides(budget: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in budget.items():
        if key not in _BUDGET_KEYS:
            raise InvalidInput(f"unknown budget {key!r}; known: {', '.join(_BUDGET_KEYS)}")
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
            raise InvalidInput(f"budget {key} must be a positive integer or null, got {value!r}")
        out[_BUDGET_KEYS[key]] = value
    return out


def actor_name(actor: Any) -> str:
    """Return the name an event records for ``actor`` (a user, a string, or nobody)."""
    if actor is None:
        return ""
    if hasattr(actor, "get_username"):
        return actor.get_username()
    return str(actor)
