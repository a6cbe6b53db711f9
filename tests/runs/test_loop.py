"""The engine loop end to end with the scripted model and the test world."""
import pytest

from ledger.models import ToolAttempt, ToolCall
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.services import run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db


def test_mixed_run_succeeds_and_records_everything(engine):
    engine.make_agent("mixed", engine.MIXED_SCRIPT, plan=["quote", "pay", "ship", "notify"])
    run = run_start(agent="mixed", goal="sell a book")
    assert drive(run) == "succeeded"
    assert [t for t, _, _ in engine.world.effects] == ["charge", "ship", "email"]
    calls = ToolCall.objects.filter(run=run).order_by("turn")
    assert [c.status for c in calls] == ["succeeded"] * 4
    assert run.steps_done == 4 and run.steps_total == 4
    assert replay_state(run.pk) == load_state(run.pk)
    assert run.model_calls == 8 and run.tool_calls == 4
    steps = list(run.steps.order_by("position").values_list("key", "status"))
    assert steps == [("quote", "succeeded"), ("pay", "succeeded"), ("ship", "succeeded"),
                     ("notify", "succeeded")]
    assert all(s.started_at and s.finished_at for s in run.steps.all())


def test_invalid_arguments_are_model_visible_not_a_crash(engine):
    script = {"s": [engine.call("lookup", wrong=1), engine.call("lookup", item="x"), engine.say("ok")]}
    engine.make_agent("badargs", script, plan=["s"])
    run = run_start(agent="badargs", goal="g")
    assert drive(run) == "succeeded"
    first = load_state(run.pk)["turns"][0]["calls"][0]["result"]
    assert first["status"] == "failed" and first["error"]["category"] == "invalid_arguments"
    assert "item: is required" in first["error"]["message"]
    assert "wrong: is not an argument of this tool" in first["error"]["message"]


def test_timeout_then_success_keeps_one_result_and_two_attempts(engine):
    from ledger.errors import ToolTransient

    engine.world.fail_next["lookup"] = [ToolTransient("503")]
    engine.make_agent("flaky", {"s": [engine.call("lookup", item="x"), engine.say("ok")]}, plan=["s"])
    run = run_start(agent="flaky", goal="g")
    assert drive(run) == "succeeded"
    call = ToolCall.objects.get(run=run)
    assert list(ToolAttempt.objects.filter(tool_call=call).values_list("status", flat=True)) == [
        "failed", "succeeded"]
    results = [c["result"] for t in load_state(run.pk)["turns"] for c in t["calls"]]
    assert [r["status"] for r in results] == ["succeeded"]


def test_ambiguous_unsafe_write_goes_unknown_and_is_not_repeated(engine):
    engine.world.timeout_after_effect.add("email")
    engine.make_agent("mailer", {"s": [engine.call("email", to="a@b.c"), engine.say("ok")]}, plan=["s"])
    run = run_start(agent="mailer", goal="g")
    assert drive(run) == "unknown"
    assert engine.world.count("email") == 1
    call = ToolCall.objects.get(run=run)
    assert call.status == "unknown" and run.current_tool_call == call.tool_call_id
    assert drive(run) == "unknown" and engine.world.count("email") == 1


def test_probeable_write_timeout_is_probed_to_success(engine):
    engine.world.timeout_after_effect.add("ship")
    engine.make_agent("shipper", {"s": [engine.call("ship", order="o"), engine.say("ok")]}, plan=["s"])
    run = run_start(agent="shipper", goal="g")
    assert drive(run) == "succeeded"
    assert engine.world.count("ship") == 1
    assert ToolCall.objects.get(run=run).status == "succeeded"


def test_permanent_error_blocks_with_recommendation(engine):
    from ledger.errors import ToolPermissionDenied

    engine.world.fail_next["lookup"] = [ToolPermissionDenied("no access to region eu")]
    engine.make_agent("perm", {"s": [engine.call("lookup", item="eu"), engine.say("ok")]}, plan=["s"])
    run = run_start(agent="perm", goal="g")
    assert drive(run) == "blocked"
    assert run.attention_reason == "permanent_error"
    assert run.recommended_action == "retry"  # grant the permission, then retry (issue 40)
    assert "grant it, then retry" in run.recommendation_why
    assert "no access" in run.attention_detail
