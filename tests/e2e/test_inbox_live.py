"""Issue 31 items 6 and 7 in a real browser: the approvals inbox of a person who can decide
refreshes on its own (push with Redis, polling without), and the console says when live
updates are off.

Before the fix the reject form's hidden CSRF input counted as a half-typed reason, so an
inbox with one pending approval never refreshed for support or admin users.
"""
from __future__ import annotations

import os
import time

import pytest

import tests.chaos_agents  # noqa: F401 - registers chaos_approval in this process too
from approvals.models import Approval
from approvals.roles import SUPPORT
from runs.services import run_start
from tests.console_factories import make_approval, make_attention_run, make_user
from tests.e2e.conftest import shot
from tests.e2e.test_live_push import _live, _signed_in, daphne  # noqa: F401 - the fixture
from tests.e2e.workers import Worker

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True, serialized_rollback=True)]


def _pending_ids(page) -> set[str]:
    return set(page.locator("#pending article[data-id]").evaluate_all(
        "els => els.map(e => e.getAttribute('data-id'))"))


def _wait_for_approval(timeout_s: float = 60) -> Approval:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = Approval.objects.filter(tool="refund", status="pending").first()
        if found is not None:
            return found
        time.sleep(0.05)
    raise AssertionError("the worker never asked for the refund's approval")


def test_support_inbox_shows_a_new_approval_by_push_within_2s(browser, daphne, tmp_path):  # noqa: F811
    """With Redis and polling off, only the websocket push can bring the new approval."""
    make_user("sam", SUPPORT)
    first = make_approval(make_attention_run("waiting"), tool="send_email",
                          args={"to": "a@example.com"})
    sam = _signed_in(browser, daphne, "sam")
    worker = Worker("inbox", tmp_path,
                    REDIS_URL=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    try:
        sam.goto(f"{daphne}/approvals/")
        _live(sam)
        assert _pending_ids(sam) == {str(first.pk)}
        sam.evaluate("window.__sameDocument = true")
        worker.start()
        run_start(agent="chaos_approval", goal="Refund order 7", input={"order": "o-7"})
        approval = _wait_for_approval()
        asked = time.monotonic()
        sam.locator(f"#approval-{approval.pk}").wait_for(timeout=2000)
        seen = time.monotonic() - asked
        print(f"the new approval showed in the support inbox {seen * 1000:.0f} ms after it "
              "was committed")
        assert seen < 2.0
        assert sam.evaluate("window.__sameDocument") is True  # no reload
        assert sam.locator("#live-off").is_hidden()
        shot(sam, "inbox_live_push")
    finally:
        worker.stop()
        sam.context.close()  # an open websocket would hold daphne up at its shutdown


def test_support_inbox_polls_without_redis_and_says_so(new_page, live_server, settings):
    """Without websockets (the test server has none), the inbox polls and the banner says so."""
    settings.AGENTOPS_CONSOLE_POLL_S = 1
    make_user("sam", SUPPORT)
    first = make_approval(make_attention_run("waiting"), tool="send_email",
                          args={"to": "a@example.com"})
    sam = new_page("sam")
    sam.goto(f"{live_server.url}/approvals/")
    assert _pending_ids(sam) == {str(first.pk)}
    banner = sam.locator("#live-off")
    banner.wait_for(state="visible", timeout=5000)
    text = banner.inner_text()
    assert "Live updates are off" in text and "every 1 s" in text
    assert banner.locator("xpath=ancestor::header").count() == 1  # in the top bar
    sam.evaluate("window.__sameDocument = true")
    second = make_approval(make_attention_run("waiting"), tool="send_email",
                           args={"to": "b@example.com"})
    added = time.monotonic()
    sam.locator(f"#approval-{second.pk}").wait_for(timeout=2500)  # one 1 s poll, plus slack
    print(f"the new approval showed {(time.monotonic() - added) * 1000:.0f} ms after it was "
          "added (polling every 1 s)")
    assert sam.evaluate("window.__sameDocument") is True
    shot(sam, "inbox_polling_banner")


def test_inbox_keeps_a_half_typed_reject_reason(new_page, live_server, settings):
    """Polling still never wipes what a person typed (the reason of a reject)."""
    settings.AGENTOPS_CONSOLE_POLL_S = 1
    make_user("sam", SUPPORT)
    first = make_approval(make_attention_run("waiting"), tool="send_email",
                          args={"to": "a@example.com"})
    sam = new_page("sam")
    sam.goto(f"{live_server.url}/approvals/")
    sam.locator(f"#approval-{first.pk} form[data-reject] input[name=reason]").fill("wrong cust")
    sam.locator("body").click(position={"x": 5, "y": 300})  # focus leaves the field
    second = make_approval(make_attention_run("waiting"), tool="send_email",
                           args={"to": "b@example.com"})
    time.sleep(2.5)
    assert sam.locator(f"#approval-{second.pk}").count() == 0  # not refreshed while typing
    value = sam.locator(f"#approval-{first.pk} form[data-reject] input[name=reason]").input_value()
    assert value == "wrong cust"
