"""Approvals end to end through the engine: approve, reject, edit, races, stale, expiry."""
from __future__ import annotations

import datetime as dt
import threading

import pytest
from django.db import connection

from agentops import clock
from agentops.errors import InvalidInput
from approvals.actions import ACTIONS
from approvals.errors import ActionNotApplicable, AlreadyDecided, NotAllowed, StaleApproval
from approvals.models import Approval, Intervention
from approvals.services import approval_decide, approval_expire, approvals_expire_due
from ledger.models import ToolCall
from runs.engine.runtime.snapshots import load_state
from runs.models import Event, Run
from runs.services import run_start
from tests.approvals.conftest import agent, approval_run
from tests.engine_agents import call, say
from tests.conftest import drive
from tests.engine_agents import world

pytestmark = pytest.mark.django_db


def pending(run: Run) -> Approval:
    return Approval.objects.get(run=run, status="pending")


def model_view(run: Run, tool_call_id: str) -> dict:
    for turn in load_state(run.pk)["turns"]:
        for c in turn["calls"]:
            if c["id"] == tool_call_id:
                return c
    raise AssertionError("call not in state")


def test_a_tool_that_always_needs_approval_waits_and_runs_once_approved(engine, users):
    run = approval_run()
    a = pending(run)
    assert a.proposed_args == {"to": "bob", "amount": 5} and a.risk == "high"
    assert a.expiry_outcome == "deny" and world.count("pay") == 0
    assert run.wait_data["approvals"] == [a.pk]
    ACTIONS["approve"].execute(users["support"], a, "")
    run.refresh_from_db()
    assert run.status == "queued"
    assert drive(run) == "succeeded"
    assert [x for t, _, x in world.effects if t == "pay"] == [{"to": "bob", "amount": 5}]
    a.refresh_from_db()
    assert a.status == "approved" and a.decided_by == users["support"]
    assert Intervention.objects.get(run=run).action == "approval.approve"
    assert Event.objects.filter(run=run, type="approval.decided").get().actor == "support"


def test_reject_tells_the_model_why_and_the_tool_never_runs(engine, users):
    run = approval_run()
    a = pending(run)
    ACTIONS["reject"].execute(users["support"], a, "bob is not a known supplier")
    assert drive(run) == "completed_with_exceptions" and world.count("pay") == 0
    assert ToolCall.objects.get(pk=a.tool_call_id).status == "rejected"
    seen = model_view(run, a.tool_call.tool_call_id)["result"]
    assert seen["status"] == "rejected"
    assert seen["error"]["category"] == "rejected"
    assert seen["error"]["message"] == "rejected by support: bob is not a known supplier"


def test_reject_needs_a_reason(engine, users):
    run = approval_run()
    with pytest.raises(InvalidInput, match="reason"):
        ACTIONS["reject"].execute(users["support"], pending(run), " ")
    assert pending(run).status == "pending"


def test_edited_arguments_are_validated_kept_and_executed(engine, users):
    run = approval_run(amount=500)
    a = pending(run)
    with pytest.raises(InvalidInput, match="amount"):
        ACTIONS["edit_args"].execute(users["support"], a, "", args={"to": "bob", "amount": 0})
    assert pending(run).pk == a.pk
    ACTIONS["edit_args"].execute(users["support"], a, "cap at 50", args={"to": "bob", "amount": 50})
    assert drive(run) == "succeeded"
    assert [x for t, _, x in world.effects if t == "pay"] == [{"to": "bob", "amount": 50}]
    a.refresh_from_db()
    call = ToolCall.objects.get(pk=a.tool_call_id)
    assert a.proposed_args == {"to": "bob", "amount": 500} == call.args
    assert a.approved_args == {"to": "bob", "amount": 50} == call.approved_args
    assert model_view(run, call.tool_call_id)["args"] == {"to": "bob", "amount": 50}
    audit = Intervention.objects.get(run=run)
    assert audit.action == "approval.edit_approve" and audit.data["approved_args"]["amount"] == 50


def test_the_second_decision_is_told_who_decided_first(engine, users):
    run = approval_run()
    a = pending(run)
    ACTIONS["approve"].execute(users["support"], a, "")
    with pytest.raises(AlreadyDecided, match="approved by support"):
        approval_decide(approval=a, user=users["admin"], approve=False, reason="no")
    stale_copy = Approval.objects.get(pk=a.pk)
    with pytest.raises(ActionNotApplicable, match="already approved by support"):
        ACTIONS["reject"].execute(users["admin"], stale_copy, "no")


def test_no_self_approval(engine, users):
    """Whoever started the run asked for its risky call: someone else must approve it."""
    from django.test import Client

    agent("selfie", {"s": [call("pay", to="bob", amount=5), say("done")]}, ["s"])
    run = run_start(agent="selfie", goal="g", actor=users["support"])
    assert drive(run) == "waiting"
    a = pending(run)
    assert a.requested_by == users["support"]
    client = Client()
    client.force_login(users["support"])
    inbox = client.get("/approvals/").content.decode()
    assert f'id="approval-{a.pk}"' in inbox and "You started this run" in inbox
    response = client.post(f"/approvals/{a.pk}/approve/", {"reason": ""}, follow=True)
    assert "someone else must decide it" in response.content.decode()
    with pytest.raises(NotAllowed, match="someone else"):
        approval_decide(approval=a, user=users["support"], approve=True)
    a.refresh_from_db()
    assert a.status == "pending"
    ACTIONS["approve"].execute(users["admin"], a, "")


def test_an_approval_goes_stale_when_the_plan_changed(engine, users):
    run = approval_run()
    a = pending(run)
    Run.objects.filter(pk=run.pk).update(plan_version=7)
    with pytest.raises(StaleApproval, match="plan changed"):
        approval_decide(approval=a, user=users["support"], approve=True)
    a.refresh_from_db()
    run.refresh_from_db()
    assert a.status == "stale" and world.count("pay") == 0
    assert run.status == "blocked" and run.attention_reason == "approval_expired"
    assert ToolCall.objects.get(pk=a.tool_call_id).status == "awaiting_approval"


def test_an_approval_goes_stale_when_the_run_was_cancelled(engine, users):
    run = approval_run()
    a = pending(run)
    from runs.services import run_cancel

    run_cancel(run=run, actor=users["operator"], reason="stop")
    # Cancelling expires the run's pending approvals at once (not at the next decision).
    a.refresh_from_db()
    assert a.status == "stale" and a.reason == "the run was cancelled: stop"
    with pytest.raises(AlreadyDecided, match="stale"):
        approval_decide(approval=a, user=users["support"], approve=True)
    assert ToolCall.objects.get(pk=a.tool_call_id).status == "cancelled"


def _expire(a: Approval, outcome: str) -> None:
    Approval.objects.filter(pk=a.pk).update(expires_at=clock.now() - dt.timedelta(seconds=1),
                                            expiry_outcome=outcome)


def test_expired_irreversible_approval_is_denied_and_the_model_is_told(engine, users):
    run = approval_run()
    a = pending(run)
    assert approval_expire(approval=a) == ""  # not due yet
    _expire(a, "deny")
    assert approvals_expire_due() == [a.pk]
    a.refresh_from_db()
    assert a.status == "expired"
    assert drive(run) == "completed_with_exceptions" and world.count("pay") == 0
    seen = model_view(run, a.tool_call.tool_call_id)["result"]
    assert seen["status"] == "rejected" and seen["error"]["category"] == "approval_expired"


def test_escalated_expiry_blocks_and_retry_asks_again(engine, users):
    run = approval_run()
    a = pending(run)
    _expire(a, "escalate")
    assert approval_expire(approval=a) == "escalate"
    run.refresh_from_db()
    assert run.status == "blocked" and run.attention_reason == "approval_expired"
    assert run.recommended_action == "retry"
    ACTIONS["retry"].execute(users["operator"], run, "ask the new approver")
    assert drive(run) == "waiting"
    fresh = pending(run)
    assert fresh.pk != a.pk and fresh.tool_call_id == a.tool_call_id
    ACTIONS["approve"].execute(users["support"], fresh, "")
    assert drive(run) == "succeeded" and world.count("pay") == 1


def test_expiry_can_cancel_the_run_or_ask_again(engine, users):
    run = approval_run("apr-cancel")
    _expire(pending(run), "cancel_run")
    approvals_expire_due()
    run.refresh_from_db()
    assert run.status == "cancelled"
    run2 = approval_run("apr-again")
    a = pending(run2)
    _expire(a, "rerequest")
    approvals_expire_due()
    fresh = pending(run2)
    assert fresh.pk != a.pk and fresh.expires_at > clock.now()
    run2.refresh_from_db()
    assert run2.status == "waiting" and run2.wait_until == fresh.expires_at


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_decisions_exactly_one_wins(engine, users):
    run = approval_run("race")
    a = pending(run)
    barrier, outcomes = threading.Barrier(2), {}

    def decide(name: str, approve: bool) -> None:
        try:
            barrier.wait()
            approval_decide(approval=Approval.objects.get(pk=a.pk), user=users[name],
                            approve=approve, reason="race")
            outcomes[name] = "won"
        except AlreadyDecided as exc:
            outcomes[name] = exc.details["decided_by"]
        finally:
            connection.close()

    threads = [threading.Thread(target=decide, args=("support", True)),
               threading.Thread(target=decide, args=("admin", False))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winner = [n for n, o in outcomes.items() if o == "won"]
    assert len(winner) == 1
    loser = ({"support", "admin"} - set(winner)).pop()
    assert outcomes[loser] == winner[0]
    a.refresh_from_db()
    assert a.decided_by.get_username() == winner[0]
    assert Event.objects.filter(run=run, type="approval.decided").count() == 1
