"""Child runs get a share of their parent's remaining budget; what they leave returns to it.

Parent and children run through the engine; the sweeper wakes the parent when its children
have ended; a greedy child is stopped at its share and an operator terminates it through the
console.
"""
from __future__ import annotations

import pytest
from django.urls import reverse

from agentops.agents import Agent, Budget, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, WaitForChildren, tool
from runs.models import Event, Run
from runs.services import run_start
from runs.sweeper import sweep_once
from tests.conftest import drive
from tests.console_factories import client_for, make_role_users

pytestmark = pytest.mark.django_db
TURN_TOKENS = 60  # the scripted model's usage per reply (50 + 10)


@tool(effect="read")
def crunch(ctx, i: int) -> ToolResult:
    """Crunch one chunk."""
    return ToolResult(facts={"chunk": i}, summary=f"chunk {i} crunched")


@tool(effect="read")
def fan_out(ctx, calls: list[int], split: str = "equal",
            weights: list[float] | None = None) -> ToolResult:
    """Start one child run per entry (its number of chunks) and wait for them all."""
    kids = [{"agent": "share-kid", "goal": f"crunch {n} chunks", "input": {"n": n},
             **({"weight": weights[i]} if weights else {})} for i, n in enumerate(calls)]
    raise WaitForChildren(kids, split=split)


def _agents() -> None:
    if registry.has("share-parent", "1"):
        return
    registry.register(Agent(
        name="share-kid", version="1", system_prompt="You crunch.", tools=[crunch],
        plan=[StepSpec("work")],
        model=lambda: ScriptedModel(lambda sc: call("crunch", i=sc.turn)
                                    if sc.turn <= sc.input["n"] else say("crunched"))))
    registry.register(Agent(
        name="share-parent", version="1", system_prompt="You split work.", tools=[fan_out],
        plan=[StepSpec("split")], budget=Budget(tokens=3000, tool_calls=20),
        model=lambda: ScriptedModel(lambda sc: call("fan_out", **sc.input)
                                    if sc.turn == 1 else say("all crunched"))))


@pytest.fixture(autouse=True)
def _registered(engine):
    _agents()


def _kids(parent: Run) -> list[Run]:
    return sorted(Run.objects.filter(parent=parent), key=lambda r: r.idempotency_key)


def test_children_split_the_remaining_budget_equally_and_return_what_they_leave():
    parent = run_start(agent="share-parent", goal="crunch", input={"calls": [1, 1, 1]})
    assert drive(parent) == "waiting"
    kids = _kids(parent)
    # 3000 tokens less the parent's first turn, 20 tool calls: a third each, rounded down.
    assert [(k.budget_tokens, k.budget_tool_calls) for k in kids] == [(980, 6)] * 3
    assert Event.objects.get(run=kids[0], type="run.created").data["budget_share"] == {
        "budget_tokens": 980, "budget_tool_calls": 6}
    for kid in kids:
        assert drive(kid) == "succeeded"
    assert sweep_once().children == [parent.pk]
    parent.refresh_from_db()
    assert (parent.tokens_used, parent.tool_calls) == (TURN_TOKENS + 3 * 2 * TURN_TOKENS, 3)
    spent = Event.objects.get(run=parent, type="children.spent").data
    assert spent["usage"]["tokens"] == 360
    assert spent["returned"] == {"tokens": 3 * 980 - 360, "tool_calls": 18 - 3}
    assert drive(parent) == "succeeded"
    assert (parent.tokens_used, parent.tool_calls) == (480, 4)  # its own + all children's


def test_a_child_cannot_spend_past_its_weighted_share():
    parent = run_start(agent="share-parent", goal="crunch",
                       input={"calls": [1, 1, 40], "split": "weights", "weights": [2, 1, 1]})
    assert drive(parent) == "waiting"
    kids = _kids(parent)
    assert [k.budget_tokens for k in kids] == [1470, 735, 735]
    assert [drive(k) for k in kids] == ["succeeded", "succeeded", "blocked"]
    greedy = kids[2]
    assert greedy.attention_reason == "budget_exhausted"
    assert greedy.tokens_used <= 735 + TURN_TOKENS  # stopped at the first call past its share
    operator = make_role_users()["operator"]
    page = client_for(operator).get(reverse("console:run", args=[greedy.pk])).content.decode()
    assert "/ 735" in page  # its tokens meter shows the share as its limit
    client_for(operator).post(reverse("console:run_action", args=[greedy.pk, "terminate"]),
                              {"reason": "too greedy", "confirm": "terminate"})
    greedy.refresh_from_db()
    assert greedy.status == "cancelled"
    sweep_once()
    parent.refresh_from_db()
    assert parent.tokens_used == TURN_TOKENS + 2 * 2 * TURN_TOKENS + greedy.tokens_used
    assert Event.objects.get(run=parent, type="children.spent").data["returned"]["tokens"] == (
        2940 - 2 * 2 * TURN_TOKENS - greedy.tokens_used)


def test_weights_that_are_not_positive_numbers_are_refused_with_a_clear_error():
    parent = run_start(agent="share-parent", goal="crunch",
                       input={"calls": [1, 1], "split": "weights", "weights": [1, 0]})
    assert drive(parent) == "blocked"
    assert "children [1] need a positive number as their weight" in parent.attention_detail
    assert not Run.objects.filter(parent=parent).exists()
