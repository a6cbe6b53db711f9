"""Real engine runs in each state a person resolves: blocked, unknown, out of budget, waiting.

The runs are driven by the scripted model through the real loop; the tools record their side
effects in tests.engine_agents.world so a test can count them.
"""
from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from agentops.agents import Agent, Budget, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from ledger.errors import ToolPermissionDenied
from runs.models import Run
from runs.services import run_start
from tests.conftest import drive
from tests.console_factories import ROLE_USERS
from tests.engine_agents import TOOLS, world


def _release(ctx, facts, item: str) -> ToolResult:
    world.did("release", ctx.idempotency_key, {"item": item, "facts": facts})
    return ToolResult(facts={"released": item})


@tool(effect="write", idempotent=True, reversibility="reversible", compensate=_release)
def reserve(ctx, item: str) -> ToolResult:
    """Reserve stock (idempotent by key; undone by release)."""
    world.fault("reserve")
    world.did("reserve", ctx.idempotency_key, {"item": item})
    return ToolResult(facts={"reserved": item}, summary=f"reserved {item}")


@tool(effect="write", reversibility="irreversible", approval="always", parameters={
    "type": "object", "additionalProperties": False, "required": ["to", "amount"],
    "properties": {"to": {"type": "string"}, "amount": {"type": "integer", "minimum": 1}}})
def pay(ctx, to: str, amount: int) -> ToolResult:
    """Pay someone (a person approves every payment)."""
    world.did("pay", ctx.idempotency_key, {"to": to, "amount": amount})
    return ToolResult(facts={"paid": amount, "to": to}, summary=f"paid {amount} to {to}")


ALL_TOOLS = [*TOOLS, reserve, pay]


def agent(name: str, script: dict[str, list[Any]], plan: list[str], **kw: Any) -> Agent:
    """Register a scripted agent with the test tools plus reserve and pay."""
    return registry.register(Agent(
        name=name, version="1", system_prompt="You are a test agent.", tools=ALL_TOOLS,
        plan=[StepSpec(k) for k in plan], model=lambda: ScriptedModel(script), **kw))


def blocked_run(name: str = "blk") -> Run:
    """A run blocked in step ``check`` by a permanent error, after ``prep`` succeeded."""
    world.fail_next["lookup"] = [ToolPermissionDenied("no access to region eu")]
    agent(name, {"prep": [call("reserve", item="book"), say("reserved")],
                 "check": [call("lookup", item="eu"), call("lookup", item="eu2"),
                           say("checked")]},
          ["prep", "check"])
    run = run_start(agent=name, goal="g")
    assert drive(run) == "blocked"
    return run


def unknown_run(name: str = "unk", *, happened: bool = True) -> Run:
    """A run ``unknown`` on an email that timed out after (or before) it was sent."""
    from ledger.errors import ToolTimeout

    if happened:
        world.timeout_after_effect.add("email")
    else:
        world.fail_next["email"] = [ToolTimeout("email timed out")]
    agent(name, {"s": [call("email", to="a@b.c"), say("sent")]}, ["s"])
    run = run_start(agent=name, goal="g")
    assert drive(run) == "unknown"
    return run


def budget_run(name: str = "bud") -> Run:
    """A run paused by its tool-call budget (1) before the second step's call."""
    agent(name, {"a": [call("lookup", item="x"), say("a")],
                 "b": [call("lookup", item="y"), say("b")]}, ["a", "b"],
          budget=Budget(tool_calls=1))
    run = run_start(agent=name, goal="g")
    assert drive(run) == "blocked" and run.attention_reason == "budget_exhausted"
    return run


def approval_run(name: str = "apr", amount: int = 5) -> Run:
    """A run waiting for approval of a payment."""
    agent(name, {"s": [call("pay", to="bob", amount=amount), say("done")]}, ["s"])
    run = run_start(agent=name, goal="g")
    assert drive(run) == "waiting" and run.wait_kind == "approval"
    return run


@pytest.fixture
def users(db):
    """One user per role (viewer, operator, support, admin) plus 'nobody' without a role."""
    # No password: hashing five passwords per test would cost seconds on a busy machine.
    made = {}
    for name, role in {**ROLE_USERS, "nobody": None}.items():
        made[name] = User.objects.create(username=name)
        if role:
            made[name].groups.add(Group.objects.get_or_create(name=role)[0])
    return made
