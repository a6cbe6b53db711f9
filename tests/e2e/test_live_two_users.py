"""Two people, two browser contexts: one settles a stuck run with decide-and-next, the other
watches the queue, which changes through the websocket push alone (polling off, no reload).

The server is a real daphne process with the Redis channel layer (tests/e2e/test_live_push.py).
"""
from __future__ import annotations

import datetime as dt

import pytest

from approvals.roles import OPERATOR, VIEWER
from runs.models import Run
from tests.console_factories import make_attention_run, make_user
from tests.e2e.conftest import shot
from tests.e2e.test_live_push import _live, _signed_in, daphne  # noqa: F401 - the fixture

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True, serialized_rollback=True)]


def test_the_queue_of_one_user_follows_what_another_decides(browser, daphne):  # noqa: F811
    make_user("alice", OPERATOR)
    make_user("victor", VIEWER)
    first = make_attention_run(goal="Refund order 42", age=dt.timedelta(hours=2))
    second = make_attention_run(goal="Charge order 77", age=dt.timedelta(hours=1))
    alice = _signed_in(browser, daphne, "alice")
    victor = _signed_in(browser, daphne, "victor")
    try:
        _decide_and_watch(alice, victor, daphne, first, second)
    finally:  # open websockets would hold daphne up at its shutdown
        alice.context.close()
        victor.context.close()


def _decide_and_watch(alice, victor, url, first, second):
    victor.goto(f"{url}/?tab=blocked")
    _live(victor)
    rows = victor.locator("table.runs tbody tr[data-row]")
    assert rows.count() == 2
    assert victor.locator('a[data-tab="blocked"] .count').inner_text() == "2"
    victor.keyboard.press("j")  # victor is reading the first row
    assert victor.locator("tr.is-focused").get_attribute("data-id") == str(first.pk)
    # A marker that a reload would wipe: the change must come without one.
    victor.evaluate("window.__sameDocument = true")

    alice.goto(f"{url}/runs/{first.pk}/")
    _live(alice)
    alice.keyboard.press("d")
    dialog = alice.locator("dialog#confirm")
    dialog.wait_for(state="visible")
    dialog.locator("textarea[name=reason]").fill("the provider is back")
    dialog.locator("button[type=submit]").click()
    alice.wait_for_url(f"{url}/runs/{second.pk}/")  # decide-and-next moved her on

    # Victor's queue drops the settled run and names who did what, on the same document.
    victor.locator(f"#live-note:has-text('alice retried run {str(first.pk)[:8]}')").wait_for(
        timeout=3000)
    victor.locator(f'tr[data-id="{first.pk}"]').wait_for(state="detached", timeout=3000)
    assert rows.count() == 1 and rows.first.get_attribute("data-id") == str(second.pk)
    assert victor.locator('a[data-tab="blocked"] .count').inner_text() == "1"
    assert victor.locator('a[data-tab="running"] .count').inner_text() == "1"
    assert victor.evaluate("window.__sameDocument === true")
    assert Run.objects.get(pk=first.pk).status == "queued"
    shot(victor, "live_two_users_queue")
