"""What each operator action does to the run, its steps, the ledger and the event log."""
from __future__ import annotations

import pytest

from agentops.errors import InvalidInput
from approvals.actions import ACTIONS
from approvals.errors import ActionNotApplicable
from approvals.models import Intervention
from ledger.models import ToolCall
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.models import Event, Run
from runs.services import run_start
from tests.approvals.conftest import agent, blocked_run, budget_run, unknown_run
from tests.conftest import drive
from tests.engine_agents import call, say, world

pytestmark = pytest.mark.django_db


def types_after(run: Run, seq: int) -> list[str]:
    return list(Event.objects.filter(run=run, seq__gt=seq).order_by("seq")
                .values_list("type", flat=True))


def test_retry_reopens_the_failed_call_with_a_fresh_step_budget(engine, users):
    run = blocked_run()
    failed = ToolCall.objects.get(run=run, tool_call_id=run.current_tool_call)
    assert failed.status == "failed" and load_state(run.pk)["steps"]["check"]["status"] == "blocked"
    preview = ACTIONS["retry"].preview(run)
    assert [(p["tool"], p["effect_class"], p["will"]) for p in preview] == [
        ("lookup", "read", "runs again")]
    seq = run.last_seq
    ACTIONS["retry"].execute(users["operator"], run, "region access granted")
    run.refresh_from_db()
    assert run.status == "queued" and run.attention_reason == "" and run.current_tool_call == ""
    assert types_after(run, seq) == ["step.reset", "tool.reopened", "run.status"]
    step = load_state(run.pk)["steps"]["check"]
    assert step["status"] == "pending" and step["retries"] == 0
    assert drive(run) == "succeeded"
    failed.refresh_from_db()
    assert failed.status == "succeeded" and failed.attempts == 2
    audit = Intervention.objects.get(run=run)
    assert (audit.action, audit.actor_name, audit.reason) == (
        "run.retry", "operator", "region access granted")
    assert audit.data["reopened"] == [failed.tool_call_id]
    assert replay_state(run.pk) == load_state(run.pk)


def test_skip_marks_the_step_skipped_and_later_steps_see_the_operator_facts(engine, users):
    run = blocked_run()
    ACTIONS["skip"].execute(users["operator"], run, "region eu is out of scope",
                            output={"facts": {"region": "none"}})
    state = load_state(run.pk)
    assert state["steps"]["check"]["status"] == "skipped"
    assert state["facts"]["skip:check"] == {"region": "none"}
    assert drive(run) == "completed_with_exceptions" and run.steps_done == 2
    assert [(e["kind"], e["who"], e["why"]) for e in run.exceptions] == [
        ("step_skipped", "operator", "region eu is out of scope"),
        ("operator_output", "operator", "facts supplied for skipped step check: region")]
    assert Event.objects.filter(run=run, type="step.skipped").get().actor == "operator"


def test_rollback_compensates_reversible_effects_and_checklists_irreversible_ones(engine, users):
    agent("rb", {"a": [call("reserve", item="book"), call("email", to="x@y.z"),
                       call("reserve", item="pen"), say("a done")],
                 "b": [call("lookup", item="eu"), say("b done")]}, ["a", "b"])
    from ledger.errors import ToolPermissionDenied

    world.fail_next["lookup"] = [ToolPermissionDenied("denied")]
    run = run_start(agent="rb", goal="g")
    assert drive(run) == "blocked"
    start_a = Event.objects.filter(run=run, type="step.started", data__step="a").first().seq
    email = ToolCall.objects.get(run=run, tool="email")
    seq, action = run.last_seq, ACTIONS["rollback"]
    wills = {(p["tool"], p["effect_class"], p["will"])
             for p in action.preview(run, to_seq=start_a - 1, then="resume")}
    assert wills == {("reserve", "idempotent", "undone by its compensation; then the run goes on "
                      "from the checkpoint and may make it again, with a new key"),
                     ("email", "irreversible", "tick: nothing can undo it by code, so this "
                      "write stays done; handle it by hand (if at all)")}
    with pytest.raises(ActionNotApplicable, match=f"email \\({email.tool_call_id}\\)"):
        action.execute(users["operator"], run, "wrong region", to_seq=start_a - 1,
                       confirm="rollback")
    run.refresh_from_db()
    assert run.last_seq == seq and world.count("release") == 0
    assert not Intervention.objects.filter(run=run).exists()
    action.execute(users["operator"], run, "wrong region", to_seq=start_a - 1,
                   ticked=[email.tool_call_id], confirm="rollback", then="resume")
    released = [a["item"] for t, _, a in world.effects if t == "release"]
    assert released == ["pen", "book"]  # newest first
    statuses = dict(ToolCall.objects.filter(run=run).values_list("tool", "status")
                    .order_by("id").filter(tool__in=["email"]))
    assert statuses == {"email": "succeeded"}
    assert sorted(ToolCall.objects.filter(run=run, tool="reserve")
                  .values_list("status", flat=True)) == ["compensated", "compensated"]
    run.refresh_from_db()
    assert run.status == "queued" and run.steps_done == 0
    assert types_after(run, seq) == ["tool.compensated", "tool.compensated",
                                     "run.rolled_back", "run.status"]
    state = load_state(run.pk)
    assert state["steps"]["a"]["status"] == "pending" and state["rollbacks"] == 1
    assert replay_state(run.pk) == state
    assert drive(run) == "completed_with_exceptions"
    assert world.count("email") == 1 and world.count("release") == 2
    assert [e["kind"] for e in run.exceptions] == ["compensated", "compensated", "rolled_back"]


def test_rollback_refuses_a_checkpoint_in_the_middle_of_a_call(engine, users):
    run = blocked_run()
    asked = Event.objects.filter(run=run, type="model.replied", data__step="prep").first().seq
    with pytest.raises(ActionNotApplicable, match="middle of a tool call"):
        ACTIONS["rollback"].execute(users["operator"], run, "r", to_seq=asked, confirm="rollback")


def test_confirm_executed_records_the_outcome_and_the_write_happened_once(engine, users):
    run = unknown_run(happened=True)
    call_row = ToolCall.objects.get(run=run)
    assert ACTIONS["confirm_executed"].preview(run) == []
    ACTIONS["confirm_executed"].execute(users["operator"], run, "saw it in the outbox",
                                        facts={"sent_to": "a@b.c"}, evidence="msg-id 42")
    call_row.refresh_from_db()
    assert call_row.status == "confirmed_executed" and call_row.facts == {"sent_to": "a@b.c"}
    assert "msg-id 42" in call_row.summary
    assert load_state(run.pk)["facts"][call_row.tool_call_id] == {"sent_to": "a@b.c"}
    assert drive(run) == "completed_with_exceptions"  # its outcome is a person's word
    assert [e["kind"] for e in run.exceptions] == ["operator_output"]
    assert call_row.attempt_rows.get().status == "confirmed_executed"
    assert world.count("email") == 1


def test_confirm_not_executed_reruns_with_the_same_key_exactly_once(engine, users):
    run = unknown_run(happened=False)
    call_row = ToolCall.objects.get(run=run)
    key = call_row.idempotency_key
    assert world.count("email") == 0
    preview = ACTIONS["confirm_not_executed"].preview(run)
    assert [(p["tool"], p["effect_class"]) for p in preview] == [("email", "irreversible")]
    ACTIONS["confirm_not_executed"].execute(users["operator"], run, "not in the outbox",
                                            confirm="again")
    call_row.refresh_from_db()
    assert call_row.status == "confirmed_not_executed"
    assert drive(run) == "completed_with_exceptions"
    assert [e["kind"] for e in run.exceptions] == ["confirmed_not_executed"]
    call_row.refresh_from_db()
    assert call_row.status == "succeeded" and call_row.attempts == 2
    assert [k for t, k, _ in world.effects if t == "email"] == [key]


def test_resume_is_refused_until_the_budget_is_raised(engine, users):
    run = budget_run()
    with pytest.raises(ActionNotApplicable, match="still exhausted"):
        ACTIONS["resume"].execute(users["operator"], run, "go on")
    with pytest.raises(InvalidInput, match="not above the current limit"):
        ACTIONS["raise_budget"].execute(users["admin"], run, "more", tool_calls=1)
    result = ACTIONS["raise_budget"].execute(users["admin"], run, "worth it", tool_calls=5)
    assert result["resumed"] is True and result["new"] == {"budget_tool_calls": 5}
    run.refresh_from_db()
    assert run.budget_tool_calls == 5 and run.status == "queued"
    assert drive(run) == "succeeded"
    assert list(Intervention.objects.filter(run=run).values_list("action", flat=True)) == [
        "run.raise_budget"]


def test_resume_after_a_raise_elsewhere(engine, users):
    run = budget_run()
    Run.objects.filter(pk=run.pk).update(budget_tool_calls=10)
    run.refresh_from_db()
    ACTIONS["resume"].execute(users["operator"], run, "budget raised by finance")
    assert drive(run) == "succeeded"


def test_terminate_cancels_and_nothing_runs_after(engine, users):
    run = blocked_run()
    ACTIONS["terminate"].execute(users["operator"], run, "customer withdrew", confirm="terminate")
    run.refresh_from_db()
    assert run.status == "cancelled" and run.finished_at is not None
    assert drive(run) == "cancelled"
    with pytest.raises(ActionNotApplicable, match="already ended"):
        ACTIONS["terminate"].execute(users["operator"], run, "again", confirm="terminate")


def test_every_run_action_needs_a_reason(engine, users):
    run = blocked_run()
    with pytest.raises(InvalidInput, match="reason is required"):
        ACTIONS["retry"].execute(users["operator"], run, "  ")
    run.refresh_from_db()
    assert run.status == "blocked"


def test_retry_after_a_loop_closes_the_calls_that_never_ran_and_resets_the_guards(engine, users):
    same = call("lookup", item="x")
    agent("looper", {"s": [same] * 6 + [say("done at last")]}, ["s"])
    run = run_start(agent="looper", goal="g")
    assert drive(run) == "blocked" and run.attention_reason == "loop_detected"
    state = load_state(run.pk)
    orphans = list(state["open_calls"])
    assert orphans and not ToolCall.objects.filter(tool_call_id__in=orphans).exists()
    ACTIONS["retry"].execute(users["operator"], run, "looked fine to me")
    state = load_state(run.pk)
    assert state["open_calls"] == {} and state["guards"]["recent_calls"] == []
    assert model_result(state, orphans[0])["status"] == "cancelled"
    # Fresh guards: the agent gets two more real calls before the same loop stops it again.
    assert drive(run) == "blocked" and run.attention_reason == "loop_detected"
    assert ToolCall.objects.filter(run=run, tool="lookup").count() == 4


def model_result(state: dict, call_id: str) -> dict:
    return next(c["result"] for t in state["turns"] for c in t["calls"] if c["id"] == call_id)
