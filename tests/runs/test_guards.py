"""Budgets, the circuit breaker, loop and stall detection end blocked with evidence."""
import pytest

from agentops.llm.scripted import call, say
from ledger.errors import ToolTransient
from ledger.models import ToolLimit
from runs.models import Snapshot
from runs.services import run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db


def test_token_budget_exhaustion_snapshots_then_blocks(engine):
    script = {"s": [call("lookup", item=str(i)) for i in range(20)] + [say("ok")]}
    engine.make_agent("spender", script, plan=["s"])
    run = run_start(agent="spender", goal="g", budget={"tokens": 200})
    assert drive(run) == "blocked"
    assert run.attention_reason == "budget_exhausted"
    # 0 of 1 steps done: raising the budget of a run that barely started is rarely right.
    assert run.recommended_action == "terminate"
    assert run.recommended_alternatives == ["raise_budget"]
    assert "tokens: used" in run.attention_detail
    assert run.tokens_used >= 200
    assert Snapshot.objects.filter(run=run, seq=run.last_seq).exists()


def test_tool_call_budget(engine):
    script = {"s": [call("lookup", item=str(i)) for i in range(20)] + [say("ok")]}
    engine.make_agent("caller", script, plan=["s"])
    run = run_start(agent="caller", goal="g", budget={"tool_calls": 3})
    assert drive(run) == "blocked"
    assert run.tool_calls == 3 and "tool_calls: used 3 of 3" in run.attention_detail


def test_loop_detection_keeps_the_repeating_calls_as_evidence(engine):
    script = {"s": [call("lookup", item="same")] * 10 + [say("ok")]}
    engine.make_agent("looper", script, plan=["s"])
    run = run_start(agent="looper", goal="g")
    assert drive(run) == "blocked"
    assert run.attention_reason == "loop_detected"
    assert "lookup" in run.attention_detail and "asked for 3 times" in run.attention_detail


def test_stall_after_rounds_without_progress(engine):
    script = {"s": [call("poll", ref=f"r{i}") for i in range(12)] + [say("ok")]}
    engine.make_agent("staller", script, plan=["s"])
    run = run_start(agent="staller", goal="g")
    assert drive(run) == "blocked"
    assert run.attention_reason == "stalled"
    assert "5 rounds without progress" in run.attention_detail
    assert run.tool_calls == 7


def test_circuit_breaker_opens_after_consecutive_failures_and_pauses_runs(engine):
    ToolLimit.objects.create(tool="lookup", breaker_threshold=3, breaker_cooldown_s=600)
    engine.world.fail_next["lookup"] = [ToolTransient("503")] * 3
    engine.make_agent("breaker", {"s": [call("lookup", item="x"), say("ok")]}, plan=["s"])
    first = run_start(agent="breaker", goal="g")
    assert drive(first) == "blocked"
    limit = ToolLimit.objects.get(tool="lookup")
    assert limit.breaker_failures == 3 and limit.breaker_opened_at is not None
    second = run_start(agent="breaker", goal="g")
    assert drive(second) == "blocked"
    assert second.attention_reason == "circuit_open"
    assert engine.world.fail_next["lookup"] == []
