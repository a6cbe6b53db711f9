"""The approvals inbox: who sees the decision forms, refusals, validation, escaping."""
from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import Approval
from approvals.statuses import ApprovalStatus
from tests.console_factories import make_approval, make_attention_run, make_role_users

pytestmark = pytest.mark.django_db
XSS = "<script>alert(1)</script>"


@pytest.fixture
def users():
    """One user per role plus a user with no role."""
    return make_role_users()


@pytest.fixture
def approval():
    """A pending approval on a run waiting for it."""
    return make_approval(make_attention_run("waiting"), args={"to": "x@example.com", "n": 1})


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_support_sees_decision_forms_and_countdown(users, approval):
    html = client_for(users["support"]).get(reverse("console:inbox")).content.decode()
    assert reverse("console:approval_decide", args=[approval.pk, "approve"]) in html
    assert reverse("console:approval_decide", args=[approval.pk, "reject"]) in html
    assert "Edit arguments and approve" in html and "data-countdown" in html


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_other_roles_see_the_inbox_read_only(users, approval, role):
    html = client_for(users[role]).get(reverse("console:inbox")).content.decode()
    assert approval.tool in html
    assert "approval_decide" not in html and "/approve/" not in html
    assert "Read-only" in html


@pytest.mark.parametrize("verb", ["approve", "reject", "edit_args"])
def test_non_support_roles_are_refused_decisions(users, approval, verb):
    url = reverse("console:approval_decide", args=[approval.pk, verb])
    for role in ("viewer", "operator"):
        assert client_for(users[role]).post(url, {"reason": "r", "args": "{}"}).status_code == 403
    assert Approval.objects.get(pk=approval.pk).status == ApprovalStatus.PENDING


def test_reject_without_reason_changes_nothing(users, approval):
    client = client_for(users["support"])
    response = client.post(reverse("console:approval_decide", args=[approval.pk, "reject"]),
                           {"reason": "  "}, follow=True)
    assert "A reason is required to reject" in response.content.decode()
    assert Approval.objects.get(pk=approval.pk).status == ApprovalStatus.PENDING


def test_edit_with_invalid_json_changes_nothing(users, approval):
    response = client_for(users["support"]).post(
        reverse("console:approval_decide", args=[approval.pk, "edit_args"]),
        {"args": "{not json"}, follow=True)
    assert "Not valid JSON" in response.content.decode()
    assert Approval.objects.get(pk=approval.pk).status == ApprovalStatus.PENDING


def test_edit_preview_shows_a_diff(users, approval):
    response = client_for(users["support"]).post(
        reverse("console:approval_diff", args=[approval.pk]),
        {"args": '{"to": "y@example.com", "cc": "z"}'}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert 'class="diff-changed"' in html and 'class="diff-added"' in html
    assert 'class="diff-removed"' in html  # "n" was dropped


def test_decided_approval_cannot_be_decided_again(users, approval):
    Approval.objects.filter(pk=approval.pk).update(status=ApprovalStatus.APPROVED,
                                                   decided_by=users["admin"])
    response = client_for(users["support"]).post(
        reverse("console:approval_decide", args=[approval.pk, "approve"]), follow=True)
    assert "Already approved by admin" in response.content.decode()


def test_decision_requires_csrf(users, approval):
    client = Client(enforce_csrf_checks=True)
    client.force_login(users["support"])
    url = reverse("console:approval_decide", args=[approval.pk, "approve"])
    assert client.post(url).status_code == 403


def test_arguments_are_escaped(users):
    make_approval(make_attention_run("waiting"), args={"body": XSS})
    html = client_for(users["support"]).get(reverse("console:inbox")).content.decode()
    assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_decided_history_lists_who_decided(users, approval):
    Approval.objects.filter(pk=approval.pk).update(status=ApprovalStatus.REJECTED,
                                                   decided_by=users["support"],
                                                   reason="wrong recipient")
    html = client_for(users["viewer"]).get(reverse("console:inbox")).content.decode()
    assert "wrong recipient" in html and "pill-rejected" in html and ">support<" in html


def test_support_approves_and_the_decision_is_recorded(users, approval):
    response = client_for(users["support"]).post(
        reverse("console:approval_decide", args=[approval.pk, "approve"]))
    assert response.status_code == 302
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.APPROVED and approval.decided_by == users["support"]


def test_support_rejects_with_a_reason(users, approval):
    client_for(users["support"]).post(
        reverse("console:approval_decide", args=[approval.pk, "reject"]),
        {"reason": "wrong recipient"})
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.REJECTED and approval.reason == "wrong recipient"


@pytest.fixture
def frozen_clock():
    """The clock at 2026-03-02 10:00:00 UTC (a moment when a clock time reads like a countdown)."""
    import datetime as dt

    from tests.clock_helpers import clock_reads

    now = dt.datetime(2026, 3, 2, 10, 0, tzinfo=dt.UTC)
    with clock_reads(lambda: now):
        yield now


def test_expiry_is_a_countdown_with_the_absolute_time_on_hover(users, frozen_clock):
    import datetime as dt
    import re

    soon = make_approval(make_attention_run("waiting"),
                         expires_in=dt.timedelta(minutes=13, seconds=48))
    later = make_approval(make_attention_run("waiting"), tool="pay_invoice",
                          expires_in=dt.timedelta(hours=26))
    html = client_for(users["support"]).get(reverse("console:inbox")).content.decode()
    card = html.split(f'id="approval-{soon.pk}"')[1].split("</article>")[0]
    time_tag = re.search(r"<time [^>]*>([^<]*)</time>", card)
    assert time_tag.group(1) == "expires in 13m 48s"  # time left, not the clock time 10:13
    assert 'title="2026-03-02 10:13:48 UTC"' in time_tag.group(0)
    assert "data-countdown" in time_tag.group(0)
    other = html.split(f'id="approval-{later.pk}"')[1].split("</article>")[0]
    assert "expires in 1d 2h" in other and 'title="2026-03-03 12:00:00 UTC"' in other


def test_an_overdue_approval_reads_expired(users, frozen_clock):
    import datetime as dt

    overdue = make_approval(make_attention_run("waiting"), expires_in=dt.timedelta(seconds=-5))
    html = client_for(users["support"]).get(reverse("console:inbox")).content.decode()
    card = html.split(f'id="approval-{overdue.pk}"')[1].split("</article>")[0]
    assert ">expired</time>" in card and ">expires in" not in card
