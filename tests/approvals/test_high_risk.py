"""A high-risk approval (money-moving or irreversible write) needs a typed confirmation,
checked by the server: a bare POST (what one `a` keypress sends) decides nothing."""
from __future__ import annotations

import pytest
from django.urls import reverse

from approvals.models import Approval
from approvals.statuses import ApprovalStatus
from ledger.models import ToolCall
from tests.console_factories import client_for, make_approval, make_attention_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def refund() -> Approval:
    """A pending 250 EUR refund: a write that moves money."""
    approval = make_approval(make_attention_run("waiting"), tool="refund",
                             args={"order": "A-2002", "amount": 250, "currency": "EUR"})
    ToolCall.objects.filter(pk=approval.tool_call_id).update(effect="write")
    return Approval.objects.select_related("tool_call").get(pk=approval.pk)


def _post(users, approval, verb="approve", **data):
    return client_for(users["support"]).post(
        reverse("console:approval_decide", args=[approval.pk, verb]), data, follow=True)


def test_inbox_asks_for_the_amount_on_a_refund(users, refund):
    html = client_for(users["support"]).get(reverse("console:inbox")).content.decode()
    assert 'name="confirm" required' in html
    assert "Type 250 (the amount) or “approve” to approve" in html
    assert "data-high-risk" in html


def test_a_bare_approve_of_a_refund_decides_nothing(users, refund):
    html = _post(users, refund).content.decode()
    refund.refresh_from_db()
    assert refund.status == ApprovalStatus.PENDING and refund.decided_by is None
    assert "refund is a high-risk call: type the amount (250) or “approve”" in html


@pytest.mark.parametrize("typed", ["25", "approved", "2500"])
def test_a_wrong_confirmation_decides_nothing(users, refund, typed):
    html = _post(users, refund, confirm=typed).content.decode()
    refund.refresh_from_db()
    assert refund.status == ApprovalStatus.PENDING
    assert f"“{typed}” does not confirm refund" in html


@pytest.mark.parametrize("typed", ["250", "250.00", "€250", "APPROVE", " approve "])
def test_the_amount_or_the_word_approves(users, refund, typed):
    _post(users, refund, confirm=typed)
    refund.refresh_from_db()
    assert refund.status == ApprovalStatus.APPROVED and refund.decided_by == users["support"]


def test_edit_and_approve_needs_it_too(users, refund):
    args = '{"order": "A-2002", "amount": 100, "currency": "EUR"}'
    html = _post(users, refund, "edit_args", args=args).content.decode()
    refund.refresh_from_db()
    assert refund.status == ApprovalStatus.PENDING
    assert "refund is a high-risk call" in html
    # Confirmed, the edit passes the gate and reaches the action's own checks (this test's
    # "refund" tool is not deployed, so its edited arguments cannot be validated).
    html = _post(users, refund, "edit_args", args=args, confirm="approve").content.decode()
    assert "high-risk call" not in html and "not deployed here" in html


def test_irreversible_write_without_amount_needs_the_word(users):
    approval = make_approval(make_attention_run("waiting"), tool="delete_account",
                             args={"user": "u-1"})
    ToolCall.objects.filter(pk=approval.tool_call_id).update(effect="write",
                                                             reversibility="irreversible")
    _post(users, approval, confirm="1")
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.PENDING
    _post(users, approval, confirm="approve")
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.APPROVED


def test_rejecting_and_low_risk_approvals_need_no_confirmation(users, refund):
    low = make_approval(make_attention_run("waiting"), args={"to": "x@example.com"})
    html = client_for(users["support"]).get(reverse("console:inbox")).content.decode()
    assert html.count('name="confirm" required') == 2  # the refund's approve + edit forms
    _post(users, low)
    low.refresh_from_db()
    assert low.status == ApprovalStatus.APPROVED
    _post(users, refund, "reject", reason="not eligible")
    refund.refresh_from_db()
    assert refund.status == ApprovalStatus.REJECTED


def test_edit_and_approve_confirms_the_amount_that_will_run(users, refund):
    """Issue 31 item 5: a refund edited from 250 down to 100 is confirmed by typing 100."""
    args = '{"order": "A-2002", "amount": 100, "currency": "EUR"}'
    html = _post(users, refund, "edit_args", args=args, confirm="250").content.decode()
    refund.refresh_from_db()
    assert refund.status == ApprovalStatus.PENDING
    assert "“250” does not confirm refund: type the amount (100)" in html
    html = _post(users, refund, "edit_args", args=args, confirm="100").content.decode()
    assert "high-risk call" not in html and "does not confirm" not in html
    assert "not deployed here" in html


def test_the_edit_preview_says_which_amount_to_type(users, refund):
    html = client_for(users["support"]).post(
        reverse("console:approval_diff", args=[refund.pk]),
        {"args": '{"order": "A-2002", "amount": 100, "currency": "EUR"}'}).content.decode()
    assert "Type 100 (the amount) or “approve” to approve" in html


def test_a_reject_reason_over_the_limit_says_the_limit(users, refund):
    html = _post(users, refund, "reject", reason="x" * 2001).content.decode()
    refund.refresh_from_db()
    assert refund.status == ApprovalStatus.PENDING
    assert "The reason is 2,001 characters; the limit is 2,000." in html
    assert "A reason is required" not in html
