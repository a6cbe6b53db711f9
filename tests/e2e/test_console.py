"""The console in a real browser: each role, escaping, keyboard triage, live refresh."""
from __future__ import annotations

import re

import pytest

from runs.models import Run
from tests.console_factories import (make_approval, make_attention_run, make_role_users,
                                     make_tool_call)
from tests.e2e.conftest import shot

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True, serialized_rollback=True)]
XSS = "<script>alert(1)</script>"


@pytest.fixture
def world():
    """Users in every role, a few runs in each queue tab and one pending approval."""
    users = make_role_users()
    blocked = make_attention_run(goal="Refund order 42 for a customer charged twice",
                                 agent="billing-agent")
    make_attention_run(goal="Reconcile invoices for March", agent="finance-agent",
                       reason="loop_detected", tool="search_ledger", recommended="skip")
    unknown = make_attention_run("unknown", goal="Email the refund confirmation",
                                 agent="support-agent", tool="send_email",
                                 recommended="confirm_not_executed",
                                 detail="send_email timed out after 30 s; it may have sent")
    waiting = make_attention_run("waiting", goal="Wire $12,000 to supplier", agent="billing-agent",
                                 tool="wire_transfer")
    approval = make_approval(waiting, tool="wire_transfer", risk="high",
                             args={"amount": 12000, "currency": "USD", "to": "ACME Ltd"})
    return {"users": users, "blocked": blocked, "unknown": unknown, "approval": approval}


def test_each_role_sees_what_it_may_do(new_page, live_server, world):
    viewer = new_page("viewer")
    assert viewer.locator(".tab[aria-current] .count").inner_text() == "2"
    assert viewer.locator("[data-bulkbar]").count() == 0
    viewer.goto(f"{live_server.url}/runs/{world['blocked'].pk}/")
    assert viewer.locator(".actions").count() == 0
    assert "operators role can act" in viewer.content()

    operator = new_page("operator")
    assert operator.locator("[data-bulkbar]").is_visible()
    shot(operator, "queue")
    operator.goto(f"{live_server.url}/runs/{world['blocked'].pk}/")
    buttons = operator.locator(".actions .btn").all_inner_texts()
    assert buttons[0] == "Retry step" and "Terminate" in buttons
    shot(operator, "run_blocked")

    support = new_page("support")
    support.goto(f"{live_server.url}/approvals/")
    assert support.locator("form[data-approve]").count() == 1
    assert "ACME Ltd" in support.locator("pre.json").first.inner_text()
    shot(support, "inbox")

    admin = new_page("admin")
    admin.click("text=Settings")
    assert admin.locator("h1").inner_text() == "Settings"


def test_unknown_run_is_settled_through_the_confirm_dialog(new_page, live_server, world):
    page = new_page("operator")
    page.goto(f"{live_server.url}/runs/{world['unknown'].pk}/")
    # (The recommendation names the action by the same label, so click the button itself.)
    page.click("a[data-verb=confirm_not_executed]")
    dialog = page.locator("dialog#confirm")
    dialog.wait_for(state="visible")
    assert "send_email" in dialog.inner_text() and "reversible" in dialog.inner_text()
    assert "may send the email a second time" in dialog.inner_text()
    dialog.locator("textarea[name=reason]").fill("checked the mail provider: nothing sent")
    dialog.locator("input[name=confirm]").fill("again")
    shot(page, "run_unknown_confirm")
    dialog.locator("button[type=submit]").click()
    page.locator(".panel .pill-queued").wait_for()
    assert "It did not execute: done." in page.locator(".flash").inner_text()
    assert "run.confirm_not_executed" in page.locator(".audit-list").inner_text()


def test_tool_output_with_a_script_tag_shows_as_text(new_page, live_server, world):
    run = make_attention_run(goal=f"Summarise {XSS}")
    make_tool_call(run, tool="fetch_page", status="succeeded", summary=f"page said {XSS}",
                   facts={"html": XSS})
    page = new_page("viewer")
    alerts = []
    page.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.click("details.tc:has-text('fetch_page') summary")
    assert XSS in page.locator("h1.goal").inner_text()
    assert XSS in page.locator("details.tc[open] .tc-body").inner_text()
    assert alerts == []
    shot(page, "run_escaped")


def test_keyboard_triage(new_page, live_server, world):
    page = new_page("operator")
    page.keyboard.press("j")
    first = page.locator("tr.is-focused").get_attribute("data-id")
    page.keyboard.press("j")
    second = page.locator("tr.is-focused").get_attribute("data-id")
    assert first != second
    page.keyboard.press("k")
    assert page.locator("tr.is-focused").get_attribute("data-id") == first
    page.keyboard.press("?")
    assert page.locator("dialog#cheatsheet").is_visible()
    shot(page, "cheatsheet")
    page.keyboard.press("Escape")
    assert not page.locator("dialog#cheatsheet").is_visible()
    page.keyboard.press("o")
    page.wait_for_url(re.compile(rf".*/runs/{first}/$"))


def test_a_second_viewer_sees_the_change_without_reloading(new_page, live_server, world):
    run = world["blocked"]
    one, two = new_page("operator"), new_page("viewer")
    for page in (one, two):
        page.goto(f"{live_server.url}/runs/{run.pk}/")
        assert page.locator(".panel .pill").inner_text() == "blocked"
    Run.objects.filter(pk=run.pk).update(status="queued", attention_reason="",
                                         attention_detail="", last_seq=run.last_seq + 1)
    two.locator(".panel .pill-queued").wait_for(timeout=12_000)
    assert two.locator(".panel .pill").inner_text() == "queued"
