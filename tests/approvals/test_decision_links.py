"""Signed decision links: the page shows, its POST decides once, and every refusal says why.

Real runs wait on the real engine for a payment approval; the link page is requested over
the Django test client, and the run is driven on to check the tool ran exactly once.
"""
from __future__ import annotations

import time

import pytest
from django.core import signing
from django.test import Client

from approvals.links import approval_links
from approvals.models import Approval, Intervention
from tests.approvals.conftest import approval_run
from tests.conftest import drive
from tests.console_factories import client_for
from tests.engine_agents import world

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting(engine, users, settings):
    """A run waiting for approval of ``pay(to=bob, amount=5)`` and support's links for it."""
    settings.AGENTOPS_SITE_URL = "https://ops.example.com/"
    run = approval_run("links")
    approval = Approval.objects.get(run=run)
    return run, approval, approval_links(approval=approval, recipient=users["support"])


def _path(url: str) -> str:
    assert url.startswith("https://ops.example.com/")
    return url.removeprefix("https://ops.example.com")


def test_links_are_absolute_and_the_console_link_needs_a_sign_in(waiting):
    _, approval, links = waiting
    assert "/decide/" in links.approve_url and links.approve_url != links.reject_url
    assert links.open_url == f"https://ops.example.com/approvals/?focus={approval.pk}"
    assert Client().get(_path(links.open_url)).status_code == 302  # to the login page


def test_get_shows_the_exact_call_and_decides_nothing(waiting):
    run, approval, links = waiting
    page = Client().get(_path(links.approve_url))
    html = page.content.decode()
    assert page.status_code == 200
    assert "Approve: pay" in html and "&quot;amount&quot;: 5" in html and str(run.pk)[:8] in html
    assert "For <strong>support</strong>" in html and 'method="post"' in html
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_post_approves_as_the_recipient_through_the_action_and_the_tool_runs_once(waiting,
                                                                                 users):
    run, approval, links = waiting
    page = Client().post(_path(links.approve_url), {"confirm": "5"})
    assert page.status_code == 200, page.content.decode()
    assert "pay: approved by support; the call runs now." in page.content.decode()
    row = Intervention.objects.get(action="approval.approve")
    assert row.actor.username == "support" and row.data["channel"] == "email_link"
    audit = client_for(users["admin"]).get("/audit/").content.decode()
    assert "approval.approve <span class=\"muted\" data-channel>via email_link</span>" in audit
    assert drive(run) == "succeeded"
    assert [e[0] for e in world.effects].count("pay") == 1


def test_a_high_risk_link_needs_the_typed_amount(waiting):
    _, approval, links = waiting
    page = Client().post(_path(links.approve_url), {"confirm": "6"})
    assert page.status_code == 422
    assert "“6” does not confirm pay: type the amount (5) or “approve”. Nothing was decided" \
        in page.content.decode()
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    # refused, nothing decided: the link still works
    assert Client().post(_path(links.approve_url), {"confirm": "5"}).status_code == 200


def test_a_link_used_twice_is_refused(waiting):
    _, _, links = waiting
    assert Client().post(_path(links.approve_url), {"confirm": "5"}).status_code == 200
    again = Client().get(_path(links.approve_url))
    assert again.status_code == 409 and "This link was already used on" in again.content.decode()
    # the reject link of the same message shares its nonce: the message decided once
    other = Client().post(_path(links.reject_url), {"reason": "no"})
    assert other.status_code == 409 and "already used" in other.content.decode()


def test_an_expired_link_is_refused(waiting, monkeypatch, settings):
    _, approval, links = waiting
    later = time.time() + settings.AGENTOPS_DECISION_LINK_MAX_AGE_S + 5
    monkeypatch.setattr(signing.time, "time", lambda: later)
    page = Client().post(_path(links.approve_url), {"confirm": "5"})
    assert page.status_code == 410
    assert "This link has expired (links work for 24 hours)" in page.content.decode()
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_a_link_after_the_arguments_changed_is_refused(waiting, users):
    _, approval, links = waiting
    # under the two-person rule an edit keeps the approval pending with new arguments
    Approval.objects.filter(pk=approval.pk).update(approvers_required=2)
    edit = client_for(users["admin"]).post(
        f"/approvals/{approval.pk}/edit_args/",
        {"args": '{"to": "bob", "amount": 4}', "confirm": "4"}, follow=True)
    assert "1 of 2 approvals" in edit.content.decode()
    page = Client().get(_path(links.approve_url))
    assert page.status_code == 409
    assert "The arguments of this approval changed after this link was sent" in \
        page.content.decode()


def test_a_recipient_without_the_role_is_refused(waiting, users):
    _, approval, _ = waiting
    links = approval_links(approval=approval, recipient=users["viewer"])
    page = Client().get(_path(links.approve_url))
    assert page.status_code == 403 and "Approve needs the support role" in page.content.decode()
    assert Client().post(_path(links.approve_url), {"confirm": "5"}).status_code == 403
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_someone_else_signed_in_is_refused(waiting, users):
    _, approval, links = waiting
    page = client_for(users["admin"]).post(_path(links.approve_url), {"confirm": "5"})
    html = page.content.decode()
    assert page.status_code == 403
    assert "This link was sent to support, and you are signed in as admin" in html
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_the_recipient_signed_in_may_use_it(waiting, users):
    _, approval, links = waiting
    page = client_for(users["support"]).post(_path(links.approve_url), {"confirm": "5"})
    assert page.status_code == 200
    assert Approval.objects.get(pk=approval.pk).decided_by.username == "support"


def test_an_altered_link_is_refused(waiting):
    _, approval, links = waiting
    url = _path(links.approve_url)
    page = Client().get(url[:-3] + ("A" if url[-3] != "A" else "B") + url[-2:])
    assert page.status_code == 403 and "This link is not valid" in page.content.decode()


def test_reject_asks_for_a_reason_and_the_agent_reads_it(waiting):
    run, approval, links = waiting
    page = Client().get(_path(links.reject_url))
    assert "Reason for rejecting" in page.content.decode()
    blank = Client().post(_path(links.reject_url), {"reason": " "})
    assert blank.status_code == 422 and "A reason is required" in blank.content.decode()
    done = Client().post(_path(links.reject_url), {"reason": "bob was paid already"})
    assert "pay: rejected by support" in done.content.decode()
    row = Intervention.objects.get(action="approval.reject")
    assert row.data["channel"] == "email_link" and row.reason == "bob was paid already"
    assert drive(run) in ("succeeded", "completed_with_exceptions")
    assert "pay" not in [e[0] for e in world.effects]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_one_link_posted_twice_at_once_decides_once(engine, users, settings):
    import threading

    from django.db import connection

    settings.AGENTOPS_SITE_URL = "https://ops.example.com"
    approval = Approval.objects.get(run=approval_run("linkrace"))
    url = _path(approval_links(approval=approval, recipient=users["support"]).approve_url)
    barrier, codes = threading.Barrier(2), []

    def post() -> None:
        try:
            barrier.wait()
            codes.append(Client().post(url, {"confirm": "5"}).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [200, 409]
    assert Intervention.objects.filter(action="approval.approve").count() == 1


def test_a_link_to_an_approval_decided_in_the_console_says_by_whom(waiting, users):
    _, approval, links = waiting
    client_for(users["admin"]).post(f"/approvals/{approval.pk}/approve/", {"confirm": "5"})
    page = Client().get(_path(links.approve_url))
    assert page.status_code == 409
    assert "This approval was already approved by admin." in page.content.decode()
