"""What a button promises is what happens in the world (issue 31, bugs #1 and #2).

Each test drives a demo run through the engine into the situation the issue describes,
presses the action through the console (the Django test client) or the API, and counts the
demo world's effects against what the preview said.
"""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from agentops.demo.models import WorldEffect
from approvals.actions import ACTIONS
from approvals.apikeys import apikey_create
from approvals.models import Intervention
from approvals.errors import ConfirmationRequired
from ledger.models import ToolCall
from runs.models import Event, Run
from runs.services import run_start
from tests.conftest import drive
from tests.api.conftest import ApiClient
from tests.console_factories import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(engine):
    """Return the demo agents module, registered, with ticks driven in-process."""
    from agentops.demo import agents

    return agents


def _kinds(run: Run) -> list[str]:
    return list(WorldEffect.objects.filter(run_id=str(run.pk)).order_by("id")
                .values_list("kind", flat=True))


def _email_unknown() -> Run:
    run = run_start(agent="support-returns", goal="return A-1001", input={
        "order_id": "A-1001", "faults": {"send_customer_email": "timeout_after_send"}})
    assert drive(run) == "unknown"
    assert _kinds(run) == ["refund", "return_label", "email"]
    return run


def test_it_did_not_execute_on_a_keyless_email_says_it_may_send_it_twice(demo, users):
    """Bug #2: the preview promised the same idempotency key; confirming re-sent the email."""
    run = _email_unknown()
    email = ToolCall.objects.get(run=run, tool="send_customer_email")
    assert (email.status, email.idempotent, email.probeable) == ("unknown", False, False)
    [line] = ACTIONS["confirm_not_executed"].preview(run)
    assert "same idempotency key" not in line["will"]
    assert "may send the customer email a second time" in line["will"]
    assert line["consequence"]["may_repeat"] and line["key"] == ""
    client = client_for(users["operator"])
    url = reverse("console:run_action", args=[run.pk, "confirm_not_executed"])
    dialog = client.get(url).content.decode()
    assert "may send the customer email a second time" in dialog
    assert "Type “again” to run it again" in dialog
    refused = client.post(url, {"reason": "not in the outbox", "seen_seq": run.last_seq})
    assert refused.status_code == 422
    assert "may send the customer email a second time" in refused.content.decode()
    assert _kinds(run).count("email") == 1 and Run.objects.get(pk=run.pk).status == "unknown"
    done = client.post(url, {"reason": "not in the outbox", "seen_seq": run.last_seq,
                             "confirm": "again"})
    assert done.status_code == 302
    assert drive(run) == "completed_with_exceptions"
    # What the preview said might happen did: the person was told and typed it.
    assert _kinds(run).count("email") == 2


def test_the_api_preview_returns_the_same_consequence_lines(demo, users):
    run = _email_unknown()
    _, raw = apikey_create(user=users["operator"], name="tests")
    api = ApiClient(raw, users["operator"])
    answer = api.post_json("/api/runs/bulk-actions", {
        "action": "confirm_not_executed", "reason": "check", "run_ids": [str(run.pk)],
        "preview": True}).json()
    [preview] = answer["previews"]
    assert [c["will"] for c in preview["calls"]] == [
        line["will"] for line in ACTIONS["confirm_not_executed"].preview(run)]
    assert preview["calls"][0]["consequence"]["may_repeat"] is True
    assert _kinds(run).count("email") == 1


def test_bulk_it_did_not_execute_needs_the_word(demo, users):
    run = _email_unknown()
    with pytest.raises(ConfirmationRequired, match="again"):
        ACTIONS["confirm_not_executed"].execute(users["operator"], run, "not sent")
    assert _kinds(run).count("email") == 1


def _refund_then_blocked(fault: str = "permission") -> Run:
    run = run_start(agent="support-returns", goal="return A-1001", input={
        "order_id": "A-1001", "faults": {"create_return_label": fault}})
    assert drive(run) == "blocked"
    assert _kinds(run) == ["refund"]
    return run


def _before_refund(run: Run) -> int:
    return Event.objects.filter(run=run, type="step.started",
                                data__step="refund").order_by("seq").first().seq - 1


def test_rollback_holds_the_run_and_does_not_refund_again(demo, users):
    """Bug #1: rolling back reversed the refund and at once issued it again."""
    run = _refund_then_blocked()
    client = client_for(users["operator"])
    url = reverse("console:run_action", args=[run.pk, "rollback"])
    to_seq = _before_refund(run)
    dialog = client.get(url, {"to_seq": to_seq}).content.decode()
    assert "undone by its compensation; then the run waits for a person" in dialog
    done = client.post(url, {"to_seq": to_seq, "reason": "wrong order", "confirm": "45",
                             # the dialog's "then open the next stuck run" box shares the name
                             "then": ["hold", "next"], "seen_seq": run.last_seq})
    assert done.status_code == 302, done.content.decode()
    assert drive(run) == "blocked"
    run.refresh_from_db()
    assert run.attention_reason == "rolled_back" and run.recommended_action == "retry"
    assert _kinds(run) == ["refund", "refund.reversed"]  # not issued again


def test_roll_back_and_terminate_is_one_action_that_ends_the_run(demo, users):
    """The carrier refuses the label for good: the run cannot reach its goal, a refund stands."""
    run = _refund_then_blocked("reject")
    assert run.recommended_action == "rollback_terminate", run.recommendation_why
    assert "Roll back and terminate undoes the 1 reversible write(s)" in run.recommendation_why
    assert "Retry" not in run.recommendation_why.split("Roll back and terminate")[1]
    client = client_for(users["operator"])
    url = reverse("console:run_action", args=[run.pk, "rollback_terminate"])
    dialog = client.get(url).content.decode()
    row = re.search(r'<tr data-call="[^"]+">(.*?issue_refund.*?)</tr>', dialog, re.S).group(1)
    assert "undone by its compensation; then the run ends" in row
    done = client.post(url, {"reason": "customer withdrew", "confirm": "rollback",
                             "seen_seq": run.last_seq})
    assert done.status_code == 302, done.content.decode()
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert drive(run) == "cancelled"
    assert _kinds(run) == ["refund", "refund.reversed"]
    [audit] = Intervention.objects.filter(run=run)
    assert (audit.action, audit.data["then"]) == ("run.rollback_terminate", "terminate")


def test_terminate_says_the_refund_stays_done(demo, users):
    run = _refund_then_blocked()
    lines = {line["tool"]: line["will"] for line in ACTIONS["terminate"].preview(run)}
    assert lines["issue_refund"] == "stays done (Roll back can undo it)"


def test_a_permanent_failure_after_a_refund_recommends_rolling_it_back_in_one_action():
    """Issue 40 item 3: the goal is lost, a refund stands: not "skip", not two steps."""
    from approvals.recommend import FailureClass, Situation, decide

    sit = Situation(FailureClass.NOT_FOUND, status="blocked", tool="get_order", effect="read",
                    done=4, total=6, compensable_done=1,
                    standing_writes=("send_customer_email",))
    rec = decide(sit)
    assert rec.action == "rollback_terminate" and rec.alternatives[0] == "terminate"
    assert "skip" in rec.alternatives and "rollback" not in rec.alternatives
    assert "send_customer_email: this stays done whatever you press" in rec.why
    assert "undoes the 1 reversible write(s) and ends the run in one step" in rec.why
