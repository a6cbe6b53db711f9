"""Console round 2 in a real browser: finished-run tabs and short-id search, absolute times,
links between parent and child runs, labels, and a 250 EUR refund no keypress approves."""
from __future__ import annotations

import re

import pytest

from approvals.models import Approval
from ledger.models import ToolCall
from runs.models import Run
from tests.console_factories import make_approval, make_attention_run, make_role_users
from tests.e2e.conftest import shot
from tests.factories import make_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True, serialized_rollback=True)]


def test_finished_tabs_short_id_search_times_and_family_links(new_page, live_server):
    make_role_users()
    parent = make_attention_run("waiting", goal="Parent: refund all orders", wait_kind="children")
    child = make_run(goal="Child: refund order A-2002", agent="support-bot", parent=parent)
    Run.objects.filter(pk=child.pk).update(status="succeeded")
    failed = make_run(goal="A failed run", agent="support-bot")
    Run.objects.filter(pk=failed.pk).update(status="failed")
    page = new_page("viewer")
    assert page.locator('a[data-tab="succeeded"] .count').inner_text() == "1"
    page.locator('a[data-tab="failed"]').click()
    page.wait_for_url(re.compile(r".*tab=failed.*"))
    assert "A failed run" in page.locator("table.runs").inner_text()
    # The absolute time is the hover text of the relative age.
    title = page.locator("table.runs td.c-age time").first.get_attribute("title")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", title)
    page.locator('a[data-tab="all"]').click()
    page.fill("#search", str(child.pk)[:8])
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf".*q={str(child.pk)[:8]}.*"))
    rows = page.locator("table.runs tbody tr")
    assert rows.count() == 1 and "Child: refund order A-2002" in rows.inner_text()
    shot(page, "round2_short_id_search")
    rows.locator("a").first.click()
    page.locator("a[data-parent]").click()
    page.wait_for_url(re.compile(rf".*/runs/{parent.pk}/$"))
    assert page.locator(".panel .pill").inner_text() == "waiting"
    assert "waiting for child runs" in page.locator(".panel-head").inner_text()
    page.locator(f'nav[data-children] a[href$="/runs/{child.pk}/"]').click()
    page.wait_for_url(re.compile(rf".*/runs/{child.pk}/$"))


def test_no_keypress_approves_a_250_eur_refund(new_page, live_server):
    make_role_users()
    approval = make_approval(make_attention_run("waiting", goal="Refund order A-2002"),
                             tool="refund", args={"order": "A-2002", "amount": 250,
                                                  "currency": "EUR"})
    ToolCall.objects.filter(pk=approval.tool_call_id).update(effect="write")
    page = new_page("support")
    page.goto(f"{live_server.url}/approvals/")
    assert page.locator("article.is-focused").count() == 0  # nothing selected on arrival
    page.keyboard.press("a")  # selects the first card, decides nothing
    page.keyboard.press("a")  # on a high-risk card: focuses the confirmation field
    confirm = page.locator(f"#approval-{approval.pk} form[data-approve] input[name=confirm]")
    assert confirm.evaluate("el => el === document.activeElement")
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    shot(page, "round2_refund_confirmation")
    confirm.fill("25")
    confirm.press("Enter")
    page.locator(".flash .msg-error").wait_for()
    assert "does not confirm refund" in page.locator(".flash").inner_text()
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    page.locator(f"#approval-{approval.pk} form[data-approve] input[name=confirm]").fill("250")
    page.locator(f"#approval-{approval.pk} form[data-approve] button").click()
    page.locator(".flash .msg-success").wait_for()
    assert Approval.objects.get(pk=approval.pk).status == "approved"
