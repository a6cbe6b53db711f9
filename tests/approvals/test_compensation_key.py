"""A compensation gets its own key ("<original key>:undo") and counts only when acknowledged."""
from __future__ import annotations

import pytest

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel
from agentops.tools import ToolResult, tool
from approvals.actions import ACTIONS
from approvals.errors import ActionNotApplicable
from ledger.errors import ToolPermissionDenied
from ledger.models import ToolCall
from runs.models import Event
from runs.services import run_start
from tests.conftest import drive
from tests.engine_agents import call, lookup, say, world

UNDONE: list[dict] = []


def _silent_undo(ctx, facts, item: str):
    """An undo that forgets to say it did anything (returns None)."""
    UNDONE.append({"key": ctx.idempotency_key, "original": ctx.original_key})


def _undo(ctx, facts, item: str) -> ToolResult:
    UNDONE.append({"key": ctx.idempotency_key, "original": ctx.original_key})
    return ToolResult(facts={"released": item})


@tool(effect="write", idempotent=True, compensate=_silent_undo)
def hold_silently(ctx, item: str) -> ToolResult:
    """Hold stock; its undo acknowledges nothing."""
    return ToolResult(facts={"held": item})


@tool(effect="write", idempotent=True, compensate=_undo)
def hold(ctx, item: str) -> ToolResult:
    """Hold stock; its undo says what it released."""
    return ToolResult(facts={"held": item})


def _blocked_after(tool_name: str, name: str):
    registry.register(Agent(
        name=name, version="1", system_prompt="s", tools=[hold, hold_silently, lookup],
        plan=[StepSpec("a"), StepSpec("b", depends_on=("a",))],
        model=lambda: ScriptedModel(
            {"a": [call(tool_name, item="book"), say("held")],
             "b": [call("lookup", item="eu"), say("b")]})))
    world.fail_next["lookup"] = [ToolPermissionDenied("denied")]
    run = run_start(agent=name, goal="g")
    assert drive(run) == "blocked"
    start = Event.objects.filter(run=run, type="step.started", data__step="a").first().seq
    return run, start - 1


@pytest.mark.django_db
def test_an_undo_that_returns_nothing_is_not_recorded_as_compensated(engine, users):
    UNDONE.clear()
    run, to_seq = _blocked_after("hold_silently", "silent")
    with pytest.raises(ActionNotApplicable, match="returned NoneType, not a ToolResult"):
        ACTIONS["rollback"].execute(users["operator"], run, "undo it", to_seq=to_seq,
                                   confirm="rollback")
    row = ToolCall.objects.get(run=run, tool="hold_silently")
    assert row.status == "succeeded"  # not "compensated": nobody knows it was undone
    failed = Event.objects.get(run=run, type="tool.compensation_failed").data
    assert "acknowledging the undo" in failed["message"]
    assert not Event.objects.filter(run=run, type="tool.compensated").exists()
    assert UNDONE == [{"key": f"{row.idempotency_key}:undo", "original": row.idempotency_key}]


@pytest.mark.django_db
def test_an_acknowledged_undo_gets_the_undo_key_and_the_original(engine, users):
    UNDONE.clear()
    run, to_seq = _blocked_after("hold", "acked")
    ACTIONS["rollback"].execute(users["operator"], run, "undo it", to_seq=to_seq,
                                   confirm="rollback")
    row = ToolCall.objects.get(run=run, tool="hold")
    assert row.status == "compensated"
    assert Event.objects.get(run=run, type="tool.compensated").data["facts"] == {"released": "book"}
    assert UNDONE == [{"key": f"{row.idempotency_key}:undo", "original": row.idempotency_key}]
