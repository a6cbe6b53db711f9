"""The fence before a side effect: the attempt opens only while this worker holds the lease."""
from __future__ import annotations

import pytest

from ledger.models import ToolAttempt, ToolCall
from runs.engine.runtime.loop import run_tick
from runs.models import Event, Run
from runs.services import run_start

pytestmark = pytest.mark.django_db


def test_a_write_does_not_start_once_the_lease_has_another_owner(engine):
    def steal_then_charge(sc):
        # While the model "thinks", the lease passes to someone else (same version: only
        # the owner check can tell).
        Run.objects.filter(status="running").update(lease_owner="thief:1")
        return engine.call("charge", amount=5)

    engine.make_agent("fenced", {"s": [steal_then_charge, engine.say("ok")]}, plan=["s"])
    run = run_start(agent="fenced", goal="g")
    assert run_tick(run.pk, worker="w1") == "lease_lost"
    assert engine.world.count("charge") == 0
    call = ToolCall.objects.get(run=run)
    assert call.status == "pending"
    assert not ToolAttempt.objects.filter(tool_call=call).exists()
    assert not Event.objects.filter(run=run, type="tool.started").exists()


def test_tools_get_the_fencing_token_and_hard_deadline(engine, settings):
    from agentops.agents import Agent, StepSpec, registry
    from agentops.llm.scripted import ScriptedModel, call, say
    from agentops.tools import ToolResult, tool

    seen = {}

    @tool(effect="write", timeout=7)
    def stamp(ctx, n: int) -> ToolResult:
        """Record what the context says."""
        seen.update(token=ctx.fencing_token, deadline=ctx.deadline, run=ctx.run_id)
        return ToolResult(facts={"n": n}, summary="ok")

    registry.register(Agent(name="stamp", version="1", system_prompt="t", tools=[stamp],
                            plan=[StepSpec("s")],
                            model=lambda: ScriptedModel({"s": [call("stamp", n=1), say("ok")]})))
    run = run_start(agent="stamp", goal="g")
    assert run_tick(run.pk, worker="w1") == "succeeded"
    started = ToolAttempt.objects.get(tool_call__run=run).started_at
    opened = Event.objects.get(run=run, type="tool.started")
    run.refresh_from_db()
    # The token is the run's version right after the fenced commit opened the attempt.
    assert seen["token"] > 0 and seen["token"] < run.version
    assert seen["run"] == str(run.pk) and opened.tool_call_id
    slack = settings.AGENTOPS_LEASE_TTL_S + 7
    assert abs((seen["deadline"] - started).total_seconds() - slack) < 0.01
