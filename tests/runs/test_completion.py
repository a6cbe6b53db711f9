"""Step completion: a step is done only when what it declares is true; else never "succeeded"."""
from __future__ import annotations

import json

import pytest

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from ledger.models import ToolCall
from runs.engine.core.context import context_build
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.models import Event, Step
from runs.services import run_start
from tests.conftest import drive
from tests.engine_agents import TOOLS, world

pytestmark = pytest.mark.django_db


def _agent(name, script, step: StepSpec, **kw):
    return registry.register(Agent(name=name, version="1", system_prompt="t", tools=TOOLS,
                                   plan=[step], model=lambda: ScriptedModel(script), **kw))


def test_a_model_that_only_talks_never_ends_the_step_clean(engine):
    seen = []

    rows = []

    def remember(ctx):
        seen.append(ctx.messages[-1]["content"])
        rows.append(Step.objects.get(key="pay").status)  # while it is asked again
        return say("I refunded the customer.")  # a claim, not a tool call

    _agent("talker", {"pay": [remember] * 5},
           StepSpec("pay", requires_tools=("charge",)), max_turns_per_step=3)
    run = run_start(agent="talker", goal="refund 42")
    assert drive(run) == "blocked"
    assert run.attention_reason == "incomplete_step"
    assert run.attention_detail == "step pay ended without a successful charge"
    assert world.count("charge") == 0 and run.steps_done == 0
    # Asked again twice, each time told exactly what is missing.
    assert len(seen) == 3
    assert "missing_fields" not in seen[0]
    assert 'missing_fields: ["tool:charge"]' in seen[1] and "a successful charge" in seen[1]
    incomplete = Event.objects.filter(run=run, type="step.incomplete")
    assert [e.data["missing_fields"] for e in incomplete] == [["tool:charge"]] * 3
    assert load_state(run.pk)["steps"]["pay"]["status"] == "blocked"
    assert rows == ["running"] * 3
    assert Step.objects.get(run=run, key="pay").status == "blocked"
    assert replay_state(run.pk) == load_state(run.pk)


def test_told_what_is_missing_the_model_does_it_and_the_step_completes(engine):
    _agent("listener", {"pay": [say("done"), call("charge", amount=42), say("charged")]},
           StepSpec("pay", requires_tools=("charge",), requires_facts=("charged",)))
    run = run_start(agent="listener", goal="refund 42")
    assert drive(run) == "succeeded"
    assert world.count("charge") == 1 and run.exceptions == []


def test_required_facts_and_output_schema_are_checked(engine):
    schema = {"type": "object", "required": ["total"], "properties": {"total": {"type": "integer"}}}
    _agent("facts", {"q": [call("partial", item="book"), say("the price is 42"),
                           say(json.dumps({"total": "42"})), say(json.dumps({"total": 42}))]},
           StepSpec("q", requires_facts=("item",), output_schema=schema), max_turns_per_step=4)
    run = run_start(agent="facts", goal="price")
    assert drive(run) == "succeeded"
    missing = [e.data["missing_fields"] for e in
               Event.objects.filter(run=run, type="step.incomplete").order_by("seq")]
    assert missing == [["output:total"], ["output:total"]]
    assert load_state(run.pk)["steps"]["q"]["output"]["answer"] == {"total": 42}


def test_arguments_the_schema_refuses_are_a_refused_call_in_the_ledger(engine):
    _agent("garbage", {"pay": [call("charge", amount="lots"), call("nope", x=1),
                               call("charge", amount=42), say("charged")]},
           StepSpec("pay", requires_tools=("charge",)))
    run = run_start(agent="garbage", goal="refund")
    # The refused charge was answered by a later successful charge; the call of a tool that
    # does not exist never was: the run may not end clean (issue 41, refused calls).
    assert drive(run) == "completed_with_exceptions"
    assert [(e["kind"], e["tool"]) for e in run.exceptions] == [("refused_call", "nope")]
    rows = list(ToolCall.objects.filter(run=run).order_by("id"))
    assert [(r.tool, r.status) for r in rows] == [
        ("charge", "refused"), ("nope", "refused"), ("charge", "succeeded")]
    assert rows[0].error_class == "invalid_arguments" and "amount" in rows[0].error
    assert "no tool called 'nope'" in rows[1].error
    assert run.tool_calls == 3  # counted, visible, never run
    assert world.count("charge") == 1


def test_agent_declaring_an_unknown_required_tool_is_refused():
    with pytest.raises(ValueError, match="requires tools \\['refund'\\]"):
        Agent(name="bad", version="1", system_prompt="t", tools=TOOLS,
              plan=[StepSpec("s", requires_tools=("refund",))], model=lambda: None)


def test_a_skipped_step_is_visible_to_later_steps(engine, users):
    from approvals.actions import ACTIONS
    from ledger.errors import ToolPermissionDenied

    world.fail_next["charge"] = [ToolPermissionDenied("permission denied")]
    seen = []

    def notify(ctx):
        seen.append(next(m["content"] for m in ctx.messages
                         if m["content"].startswith("## Progress")))
        return say("notified")

    registry.register(Agent(name="skipper", version="1", system_prompt="t", tools=TOOLS,
                            plan=[StepSpec("pay", requires_tools=("charge",)),
                                  StepSpec("notify", depends_on=("pay",))],
                            model=lambda: ScriptedModel({"pay": [call("charge", amount=5)],
                                                         "notify": [notify]})))
    run = run_start(agent="skipper", goal="g")
    # Triage never recommends skipping a failed required write (issue 19): a permission
    # refusal is granted, then retried (issue 40); an operator may still skip.
    assert drive(run) == "blocked" and run.recommended_action == "retry"
    assert "skip" not in run.recommended_alternatives
    ACTIONS["skip"].execute(users["operator"], run, "no permission to charge")
    assert drive(run) == "completed_with_exceptions"
    assert ("[-] pay: pay (SKIPPED, its work was NOT done: skipped by operator: "
            "no permission to charge)") in seen[0]
    msgs = context_build(load_state(run.pk), registry.get("skipper"))
    assert "SKIPPED" in msgs[2]["content"]
