"""Deciding approvals through the API: approve, reject, edit+approve, and the refusals."""
from __future__ import annotations

from approvals.models import Approval, Intervention
from runs.models import Run
from tests.api.builders import make_approval
from tests.api.conftest import assert_error
from tests.factories import make_run


def _waiting_approval() -> Approval:
    run = make_run()
    Run.objects.filter(pk=run.pk).update(status="waiting", wait_kind="approval")
    run.refresh_from_db()
    return make_approval(run)


def test_support_approves(support):
    approval = _waiting_approval()
    response = support.post_json(f"/api/approvals/{approval.pk}/decide", {"decision": "approve"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "approved" and body["decided_by"] == support.user.username
    assert Intervention.objects.exclude(action__startswith="apikey.").get().action == "approval.approve"


def test_support_rejects_with_a_reason(support):
    approval = _waiting_approval()
    url = f"/api/approvals/{approval.pk}/decide"
    assert_error(support.post_json(url, {"decision": "reject"}), 422)
    response = support.post_json(url, {"decision": "reject", "reason": "wrong customer"})
    assert response.json()["status"] == "rejected"
    assert response.json()["reason"] == "wrong customer"


def test_a_second_decision_is_409(support, admin):
    approval = _waiting_approval()
    url = f"/api/approvals/{approval.pk}/decide"
    support.post_json(url, {"decision": "approve"})
    error = assert_error(admin.post_json(url, {"decision": "reject", "reason": "no"}), 409)
    assert support.user.username in error["message"]


def test_edit_needs_arguments_the_tool_can_check(support):
    approval = _waiting_approval()
    url = f"/api/approvals/{approval.pk}/decide"
    assert_error(support.post_json(url, {"decision": "edit"}), 422)
    # The test agent is not deployed, so edited arguments cannot be validated: refused.
    assert_error(support.post_json(url, {"decision": "edit", "args": {"to": "b@x.org"}}), 422)
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_only_support_and_admins_decide(operator, viewer):
    approval = _waiting_approval()
    url = f"/api/approvals/{approval.pk}/decide"
    for client in (operator, viewer):
        assert_error(client.post_json(url, {"decision": "approve"}), 403)
    assert_error(operator.post_json("/api/approvals/424242/decide", {"decision": "approve"}),
                 404)
    assert_error(operator.post_json(url, {"decision": "maybe"}), 422)
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_a_high_risk_approval_needs_its_amount_or_the_word(support):
    approval = _waiting_approval()
    call = approval.tool_call
    call.effect, call.args = "write", {"order": "A-2002", "amount": 250, "currency": "EUR"}
    call.save(update_fields=["effect", "args"])
    Approval.objects.filter(pk=approval.pk).update(proposed_args=call.args)
    url = f"/api/approvals/{approval.pk}/decide"
    error = assert_error(support.post_json(url, {"decision": "approve"}), 422)
    assert error["code"] == "confirmation_required" and "(250)" in error["message"]
    assert_error(support.post_json(url, {"decision": "approve", "confirm": "25"}), 422)
    approval.refresh_from_db()
    assert approval.status == "pending" and not Intervention.objects.exclude(action__startswith="apikey.").exists()
    response = support.post_json(url, {"decision": "approve", "confirm": "250"})
    assert response.status_code == 200 and response.json()["status"] == "approved"


def test_edit_confirms_the_edited_amount_not_the_proposed_one(support):
    """Issue 31 item 5: the typed amount is the one that will execute."""
    approval = _waiting_approval()
    call = approval.tool_call
    call.effect, call.args = "write", {"order": "A-2002", "amount": 320, "currency": "EUR"}
    call.save(update_fields=["effect", "args"])
    Approval.objects.filter(pk=approval.pk).update(proposed_args=call.args)
    url = f"/api/approvals/{approval.pk}/decide"
    edited = {"order": "A-2002", "amount": 160, "currency": "EUR"}
    error = assert_error(support.post_json(url, {"decision": "edit", "args": edited,
                                                 "confirm": "320"}), 422)
    assert error["code"] == "confirmation_required" and "(160)" in error["message"]
    # 160 passes the gate and reaches the action's own checks (the test tool is not deployed).
    error = assert_error(support.post_json(url, {"decision": "edit", "args": edited,
                                                 "confirm": "160"}), 422)
    assert error["code"] != "confirmation_required"
    approval.refresh_from_db()
    assert approval.status == "pending"
