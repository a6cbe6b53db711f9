"""Each demo agent end to end through the engine: the state it ends in, the world it leaves."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from agentops.demo import world
from agentops.demo.models import WorldEffect
from approvals.actions import approve
from approvals.models import Approval
from ledger.artifacts import artifact_read
from ledger.models import ToolAttempt, ToolCall
from runs.models import Event, Run
from runs.services import run_start
from runs.sweeper import sweep_once
from tests.conftest import drive

pytestmark = pytest.mark.django_db


def _start(agent, faults=None, budget=None, **input):
    if faults:
        input["faults"] = faults
    return run_start(agent=agent, goal=f"demo {agent}", input=input, budget=budget)


def _kinds(run):
    return list(WorldEffect.objects.filter(run_id=str(run.pk)).order_by("id")
                .values_list("kind", flat=True))


def test_support_return_succeeds_with_each_effect_once(demo):
    run = _start("support-returns", order_id="A-1001")
    assert drive(run) == "succeeded"
    assert _kinds(run) == ["refund", "return_label", "email"]
    assert set(ToolCall.objects.filter(run=run).values_list("status", flat=True)) == {"succeeded"}
    assert world.effects_duplicated() == []


def test_refund_over_the_limit_waits_for_approval_then_runs_once(demo):
    run = _start("support-returns", order_id="A-2002")
    assert drive(run) == "waiting"
    assert run.wait_kind == "approval"
    pending = Approval.objects.get(run=run)
    assert pending.tool == "issue_refund" and "over the 100 EUR" in pending.why
    assert "refund" not in _kinds(run)
    user = User.objects.create_user("sam", password="x" * 10)
    user.groups.add(Group.objects.get_or_create(name="support")[0])
    approve.ACTION.execute(user, pending, reason="customer is a regular")
    assert drive(run) == "succeeded"
    assert _kinds(run).count("refund") == 1


def test_refund_timeout_after_refunding_is_probed_not_repeated(demo):
    run = _start("support-returns", {"issue_refund": "timeout_after_refund"}, order_id="A-3003")
    assert drive(run) == "succeeded"
    assert _kinds(run).count("refund") == 1
    call = ToolCall.objects.get(run=run, tool="issue_refund")
    assert call.status == "succeeded" and call.facts["amount"] == 80


def test_rate_limited_carrier_with_short_retry_after_recovers(demo):
    run = _start("support-returns", {"track_logistics": "rate_limit:0"}, order_id="A-1001")
    assert drive(run) == "succeeded"
    call = ToolCall.objects.get(run=run, tool="track_logistics")
    assert list(ToolAttempt.objects.filter(tool_call=call).values_list("status", flat=True)) == [
        "failed", "succeeded"]


def test_rate_limited_carrier_with_long_retry_after_waits_on_a_timer(demo):
    run = _start("support-returns", {"track_logistics": "rate_limit:3600"}, order_id="A-1001")
    assert drive(run) == "waiting"
    assert run.wait_kind == "timer"
    assert 3500 < (run.wait_until - run.updated_at).total_seconds() <= 3600
    assert "refund" not in _kinds(run)


def test_email_timeout_after_send_is_unknown_and_never_resent(demo):
    run = _start("support-returns", {"send_customer_email": "timeout_after_send"},
                 order_id="A-1001")
    assert drive(run) == "unknown"
    assert drive(run) == "unknown"
    assert _kinds(run).count("email") == 1
    assert ToolCall.objects.get(run=run, tool="send_customer_email").status == "unknown"
    assert run.recommended_action == "confirm_executed"  # timed out after sending


def test_model_repeating_the_carrier_call_is_a_loop(demo):
    run = _start("support-returns", {"model": "repeat_tracking"}, order_id="A-1001")
    assert drive(run) == "blocked"
    assert run.attention_reason == "loop_detected"
    assert "track_logistics" in run.attention_detail


def test_sales_report_writes_a_verifiable_artifact(demo):
    run = _start("sales-report")
    assert drive(run) == "succeeded"
    facts = ToolCall.objects.get(run=run, tool="write_report").facts
    report = artifact_read(facts["report_sha256"]).decode()
    for region in ("na", "eu", "apac"):
        assert f"| {region} | {world.region_sales(region)['total']} |" in report


def test_sales_permission_error_blocks_and_recommends_granting_it(demo):
    run = _start("sales-report", {"query_sales:eu": "permission"})
    assert drive(run) == "blocked"
    # issue 40: a permission refusal is fixed where it is refused, then retried (not skipped)
    assert run.attention_reason == "permanent_error" and run.recommended_action == "retry"
    assert "query_sales's account lacks permission" in run.recommendation_why
    assert run.current_step == "sales_eu"
    assert ToolCall.objects.get(run=run, tool="query_sales", args={"region": "eu"}).attempts == 1


@pytest.mark.parametrize("fault,action,words", [
    ("credentials", "retry", "create_return_label's backend refused our credentials"),
    ("api_changed:label_id", "retry", "fix it, then retry"),
    # The 60 EUR refund stands and the run cannot reach its goal: undo it and end, one action.
    ("bad_request:weight must be positive", "rollback_terminate",
     "refused the request as invalid"),
])
def test_carrier_failures_are_answered_by_what_they_mean(demo, fault, action, words):
    run = _start("support-returns", {"create_return_label": fault}, order_id="A-1001")
    assert drive(run) == "blocked"
    assert run.recommended_action == action and words in run.recommendation_why
    assert ToolCall.objects.get(run=run, tool="create_return_label").attempts == 1


def test_sales_report_over_its_model_call_budget_is_paused(demo):
    run = _start("sales-report", budget={"model_calls": 3})
    assert drive(run) == "blocked"
    assert run.attention_reason == "budget_exhausted" and run.recommended_action == "raise_budget"
    assert run.model_calls == 3


def test_document_batch_fans_out_survives_an_outage_and_saves_each_document_once(demo):
    parent = _start("document-batch", {"model_outage": "2:2"}, documents=60, batch_size=20)
    waves = []  # the children each wave started: one batch a wave, the fourth wave has none
    while drive(parent) == "waiting":
        assert parent.wait_kind == "children"
        wave = list(Run.objects.filter(parent=parent).exclude(pk__in=[
            c.pk for w in waves for c in w]))
        waves.append(wave)
        for child in wave:
            assert drive(child) == "succeeded"
        sweep_once()
    assert parent.status == "succeeded" and parent.steps_done == parent.steps_total == 6
    assert [[c.input["batch"] for c in w] for w in waves] == [[1], [2], [3]]
    children = [c for w in waves for c in w]
    summary = ToolCall.objects.get(run=parent, tool="summarize_batch").facts
    assert summary == {"expected": 60, "saved": 60, "missing": 0}
    outage = [c for c in children if c.input.get("faults")]
    assert [c.input["batch"] for c in outage] == [2]
    assert Event.objects.filter(run=outage[0], type="model.failed").count() == 2
    # Each child read its documents in parts, a step each (its progress moves), and recovery
    # resumed after they were read: no child read a part twice.
    for child in children:
        reads = ToolCall.objects.filter(run=child, tool="read_documents").order_by("created_at")
        assert [len(tc.args["doc_ids"]) for tc in reads] == [5, 5, 5, 5]
        assert child.agent_version == "2" and child.steps_done == child.steps_total == 5
    assert WorldEffect.objects.filter(kind="document.fields").count() == 60
    assert world.effects_duplicated() == []


def test_a_child_pinned_to_the_one_step_version_still_extracts_its_batch(demo, monkeypatch):
    from agentops.agents import registry

    with monkeypatch.context() as m:  # as a child started by a launch before version 2
        m.setitem(registry._latest, "document-extract", "1")
        child = _start("document-extract", batch_id="b", batch=1,
                       doc_ids=["doc-0001", "doc-0002"])
    assert registry.get("document-extract").version == "2"
    assert drive(child) == "succeeded"
    assert child.agent_version == "1" and child.steps_total == 1
    assert ToolCall.objects.get(run=child, tool="read_documents").args == {
        "doc_ids": ["doc-0001", "doc-0002"]}
    assert WorldEffect.objects.filter(kind="document.fields").count() == 2


def test_a_batch_pinned_to_version_1_starts_every_child_at_once(demo, monkeypatch):
    from agentops.agents import registry

    with monkeypatch.context() as m:  # as a batch started by a launch before version 2
        m.setitem(registry._latest, "document-batch", "1")
        parent = _start("document-batch", documents=40, batch_size=10)
    assert drive(parent) == "waiting" and parent.agent_version == "1"
    assert Run.objects.filter(parent=parent).count() == 4
