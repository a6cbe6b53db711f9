"""Cancel: the in-flight tool sees a cancelled token; its late result is kept, never green."""
import pytest

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel
from agentops.tools import ToolResult, tool
from ledger.models import ToolCall
from runs.engine.runtime.loop import run_tick
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.models import Event, Run
from runs.services import run_cancel, run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db
seen = {}


def _cancel_from_inside(ctx) -> None:
    run_cancel(run=Run.objects.get(pk=ctx.run_id), actor="operator", reason="changed my mind")
    seen["heartbeat"] = ctx.heartbeat()
    seen["token"] = ctx.cancel.cancelled


@tool(effect="write", reversibility="irreversible")
def transfer(ctx, amount: int) -> ToolResult:
    """Move money (the operator cancels the run while this runs)."""
    _cancel_from_inside(ctx)
    return ToolResult(facts={"moved": amount}, summary="moved")


@tool(effect="read")
def slow_read(ctx, q: str) -> ToolResult:
    """Read something slowly (the run is cancelled meanwhile)."""
    _cancel_from_inside(ctx)
    return ToolResult(facts={"q": q}, summary="read")


def _run(name, tool_spec, **args):
    script = {"s": [_call(tool_spec.name, args), _say()]}
    registry.register(Agent(name=name, version="1", system_prompt="t", tools=[tool_spec],
                            plan=[StepSpec("s")], model=lambda: ScriptedModel(script)))
    return run_start(agent=name, goal="g")


def _call(name, args):
    from agentops.llm.scripted import call

    return call(name, **args)


def _say():
    from agentops.llm.scripted import say

    return say("done")


@pytest.mark.parametrize("tool_spec,args", [(transfer, {"amount": 5}), (slow_read, {"q": "x"})])
def test_late_result_is_recorded_and_the_run_stays_cancelled(engine, tool_spec, args):
    seen.clear()
    run = _run(f"cancel_{tool_spec.name}", tool_spec, **args)
    assert run_tick(run.pk, worker="w1") == "lease_lost"
    assert seen == {"heartbeat": False, "token": True}
    run.refresh_from_db()
    assert run.status == "cancelled"
    late = Event.objects.get(run=run, type="tool.late_result")
    assert late.data["status"] == "succeeded" and late.data["facts"]
    assert ToolCall.objects.get(run=run).status == "succeeded"
    assert drive(run) == "cancelled"
    assert load_state(run.pk)["status"] == "cancelled"
    assert replay_state(run.pk) == load_state(run.pk)


def test_cancelled_queued_run_is_never_claimed(engine):
    engine.make_agent("cq", {"s": [engine.say("ok")]}, plan=["s"])
    run = run_start(agent="cq", goal="g")
    run_cancel(run=run, actor="op", reason="no")
    assert run_tick(run.pk, worker="w1") == "not_claimed"
    assert not Event.objects.filter(run=run, type="model.replied").exists()
