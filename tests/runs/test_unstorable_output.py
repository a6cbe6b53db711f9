"""Model output PostgreSQL cannot store (lone surrogates, NUL; keys too) is invalid output.

It used to crash every tick until the run blocked with a misleading recovery-limit reason.
Now the reply is refused as ``invalid_output`` (the model's error class), retried, and the
run blocks with that reason only when the model keeps sending it.
"""
from __future__ import annotations

import pytest

from agentops.llm import protocol as p
from agentops.llm.scripted import call, say
from tests.scripted_items import fail_then
from runs.models import Event
from runs.services import run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db

BAD_ARGS = {
    "surrogate_key": {"item": "x", "\ud800": 1},
    "surrogate_value": {"item": "x\udfff"},
    "nul_key": {"item": "x", "a\x00b": 1},
    "nested_surrogate_key": {"item": "x", "more": [{"\udc00": "v"}]},
}


def _reply(args: dict) -> p.ModelReply:
    return p.ModelReply(tool_calls=(p.ToolCallRequest(name="lookup", arguments=args,
                                                      raw_arguments="{}"),),
                        finish_reason="tool_calls")


@pytest.mark.parametrize("case", sorted(BAD_ARGS))
def test_unstorable_arguments_are_invalid_output_and_retried(engine, case):
    name = f"odd-{case}"
    engine.make_agent(name, {"s": [fail_then(_reply(BAD_ARGS[case]), call("lookup", item="x"),
                                             times=1), say("ok")]}, plan=["s"])
    run = run_start(agent=name, goal="g")
    assert drive(run) == "succeeded"
    failed = Event.objects.get(run=run, type="model.failed")
    assert failed.data["category"] == "invalid_output"
    assert "tool_calls[0].arguments" in failed.data["message"]
    assert run.recoveries == 0


def test_unstorable_arguments_that_persist_block_as_invalid_output(engine):
    engine.make_agent("odd-forever", {"s": [fail_then(_reply(BAD_ARGS["surrogate_key"]),
                                                      say("never"), times=99)]}, plan=["s"])
    run = run_start(agent="odd-forever", goal="g")
    assert drive(run) == "blocked"
    assert run.attention_reason == "invalid_output"
    assert "surrogate" in run.attention_detail


def test_a_tool_result_with_an_unstorable_key_is_a_failed_call_not_a_crash(engine):
    from agentops.tools import ToolResult, tool

    @tool(effect="read")
    def odd(ctx, item: str) -> ToolResult:
        """Return facts with a lone surrogate key."""
        return ToolResult(facts={"\ud800": item}, summary="bad \ud800 summary")

    from agentops.agents import Agent, StepSpec, registry
    from agentops.llm.scripted import ScriptedModel

    registry.register(Agent(name="odd-tool", version="1", system_prompt="t", tools=[odd],
                            plan=[StepSpec("s")],
                            model=lambda: ScriptedModel({"s": [call("odd", item="x"),
                                                               say("ok")]})))
    run = run_start(agent="odd-tool", goal="g")
    assert drive(run) == "blocked"
    assert run.attention_reason == "permanent_error"
    assert "not JSON" in run.attention_detail
