"""Budgets: what a run may still spend, from its own limits or its team's BudgetPolicy."""
from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings

from agentops import clock
from runs.event_types import EventType
from runs.models import BudgetPolicy, Run

# Usage key -> the Run column that limits it.
_BUDGET_COLUMNS = {"tokens": "budget_tokens", "model_calls": "budget_model_calls",
                   "tool_calls": "budget_tool_calls", "cost_micros": "budget_cost_micros"}
# The events that are one failed attempt each (the reducer counts them in state["failures"]).
_FAILED = (EventType.STEP_RETRYING, EventType.TOOL_ATTEMPT_FAILED)

_FIELDS = (
    ("tokens", "budget_tokens", "tokens_used", "max_tokens"),
    ("model_calls", "budget_model_calls", "model_calls", "max_model_calls"),
    ("tool_calls", "budget_tool_calls", "tool_calls", "max_tool_calls"),
    ("cost", "budget_cost_micros", "cost_micros", "max_cost_micros"),
)


def budget_defaults(*, agent_name: str, agent_budget: Any, team_id: int) -> dict[str, Any]:
    """Return the Run budget columns for a new run of team ``team_id``.

    The team's policy for the agent > the team's policy for every agent > the agent's code.
    Another team's policies never apply; there is no installation-wide policy.
    """
    policies = {p.agent_name: p for p in BudgetPolicy.objects.filter(
        team_id=team_id, agent_name__in=["", agent_name])}
    policy = policies.get(agent_name) or policies.get("")
    values = {
        "budget_tokens": agent_budget.tokens,
        "budget_model_calls": agent_budget.model_calls,
        "budget_tool_calls": agent_budget.tool_calls,
        "budget_cost_micros": agent_budget.cost_micros,
    }
    seconds = agent_budget.seconds
    values["recovery_limit"] = settings.AGENTOPS_RECOVERY_LIMIT
    values["failure_limit"] = agent_budget.failures
    values["on_deadline"] = agent_budget.on_deadline
    if policy is not None:
        for _, column, _, pfield in _FIELDS:
            if getattr(policy, pfield) is not None:
                values[column] = getattr(policy, pfield)
        seconds = policy.max_seconds or seconds
        values["recovery_limit"] = policy.recovery_limit
        values["step_retry_limit"] = policy.step_retry_limit
        values["failure_limit"] = policy.run_failure_limit or values["failure_limit"]
        values["on_deadline"] = policy.on_deadline or values["on_deadline"]
    if seconds:
        values["deadline"] = clock.now() + dt.timedelta(seconds=seconds)
    return values


def budget_exhausted(run: Run, usage: dict[str, Any]) -> str | None:
    """Return what ran out (e.g. "tokens: used 1200 of 1000"), or None when the run may go on.

    Checked before each model call and tool call: a budget is spent once usage reaches it.
    """
    used = _used(usage)
    for name, column, _, _ in _FIELDS:
        limit = getattr(run, column)
        if limit is not None and used[name] >= limit:
            return f"{name}: used {used[name]} of {limit}"
    if run.deadline is not None and clock.now() >= run.deadline:
        then = ("; its deadline policy terminates it" if deadline_policy(run) == "terminate"
                else "")
        return f"deadline {run.deadline.isoformat(timespec='seconds')} passed{then}"
    return None


def _used(usage: dict[str, Any]) -> dict[str, int]:
    return {"tokens": usage["tokens"], "model_calls": usage["model_calls"],
            "tool_calls": usage["tool_calls"], "cost": usage["cost_micros"]}


def child_shares(run: Run, usage: dict[str, Any], weights: list[float]) -> list[dict[str, Any]]:
    """Split what ``run`` may still spend among its children by ``weights`` (rounded down).

    Only the limits the parent has are shared, so the shares never add up to more than it
    has left; each share also carries the parent's deadline: no child outlives it.
    """
    used = _used(usage)
    left = {column: max(getattr(run, column) - used[name], 0)
            for name, column, _, _ in _FIELDS if getattr(run, column) is not None}
    total = sum(weights)
    shares = []
    for weight in weights:
        share: dict[str, Any] = {column: int(amount * weight // total)
                                 for column, amount in left.items()}
        if run.deadline is not None:
            share["deadline"] = run.deadline.isoformat()
        shares.append(share)
    return shares


def children_spent(kids: list[Run], shares: list[dict[str, Any]]) -> dict[str, Any]:
    """Return what child runs spent (charged to the parent) and what of their shares returns."""
    spent = {used: sum(getattr(k, column) for k in kids)
             for used, column in (("tokens", "tokens_used"), ("model_calls", "model_calls"),
                                  ("tool_calls", "tool_calls"), ("cost_micros", "cost_micros"))}
    budget_of = {c: u for u, c in _BUDGET_COLUMNS.items()}
    returned = {}
    for column in {c for s in shares for c in s if c in budget_of}:
        reserved = sum(s.get(column, 0) for s in shares)
        returned[budget_of[column]] = max(reserved - spent[budget_of[column]], 0)
    return {"usage": spent, "returned": returned}


def deadline_policy(run: Run) -> str:
    """Return what ``run`` does past its deadline: "block" (for a person) or "terminate"."""
    return run.on_deadline or settings.AGENTOPS_DEADLINE_POLICY


def failures_spent(run: Run, state: dict[str, Any], events: Any = (), *,
                   extra: int = 0) -> str | None:
    """Return why the run's failure budget is spent (None while it may go on).

    Counts the failed attempts of every step since a person last retried one (the state's
    ``failures`` minus ``failure_base``), plus those in ``events`` about to be committed and
    ``extra`` not recorded as an event.
    """
    limit = settings.AGENTOPS_RUN_FAILURE_LIMIT if run.failure_limit is None else run.failure_limit
    if not limit:
        return None
    n = (state.get("failures", 0) - state.get("failure_base", 0) + extra
         + sum(1 for e in events if e.type in _FAILED))
    if n < limit:
        return None
    return f"{n} failed attempts across the run's steps reached its failure budget of {limit}"
