"""Resolving real engine runs from the browser (retry, edit-and-approve); the demo world page.

The runs are made by the real loop (scripted model, tests.engine_agents' world with injected
faults) and driven in-process with drive(); the console acts on them through the live server.
"""
from __future__ import annotations

import json

import pytest

from agentops.demo.world import effect_record
from approvals.models import Approval, Intervention
from ledger.errors import ToolTransient
from ledger.models import ToolCall
from runs.models import Run
from runs.services import run_start
from tests.approvals.conftest import approval_run
from tests.conftest import drive
from tests.console_factories import make_role_users
from tests.e2e.conftest import shot
from tests.engine_agents import call, say
from tests.factories import make_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True, serialized_rollback=True)]


@pytest.fixture
def people() -> dict:
    """One signed-up user per role (viewer, operator, support, admin) plus 'nobody'."""
    return make_role_users()


def _blocked_by_transient_errors(engine) -> Run:
    """A run blocked (retry_exhausted) on `lookup` answering 503 until its retries ran out."""
    engine.world.fail_next["lookup"] = [ToolTransient("backend answered 503")] * 20
    engine.make_agent("e2e-quoter", {"quote": [call("lookup", item="book"), say("quoted")]},
                      plan=["quote"])
    run = run_start(agent="e2e-quoter", goal="Quote the price of a book for a customer")
    assert drive(run) == "blocked" and run.attention_reason == "retry_exhausted"
    engine.world.fail_next.clear()  # the backend is healthy again
    return run


def test_operator_resolves_a_blocked_run_by_retry(engine, new_page, live_server, people):
    run = _blocked_by_transient_errors(engine)
    failed = ToolCall.objects.get(run=run, tool="lookup")
    page = new_page("operator")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    assert page.locator(".panel .pill").inner_text() == "blocked"
    page.locator(".actions [data-verb=retry]").click()
    dialog = page.locator("dialog#confirm")
    dialog.wait_for(state="visible")
    assert "lookup" in dialog.inner_text() and "runs again" in dialog.inner_text()
    dialog.locator("textarea[name=reason]").fill("the pricing backend is back up")
    shot(page, "run_retry_confirm")
    dialog.locator("button[type=submit]").click()

    page.locator(".panel .pill-queued").wait_for()
    assert "Retry step: done." in page.locator(".flash").inner_text()
    assert "run.retry" in page.locator(".audit-list").inner_text()
    audit = Intervention.objects.get(run=run)
    assert (audit.action, audit.actor_name, audit.reason) == (
        "run.retry", "operator", "the pricing backend is back up")

    assert drive(run) == "succeeded"
    page.reload()
    page.locator(".panel .pill-succeeded").wait_for()
    failed.refresh_from_db()
    assert failed.status == "succeeded"
    assert "book costs 42" in page.locator(f"#tc-{failed.tool_call_id}").inner_text()
    shot(page, "run_retried_succeeded")


def test_support_approves_edited_arguments(engine, new_page, live_server, people):
    run = approval_run("e2e-payer", amount=500)
    approval = Approval.objects.get(run=run, status="pending")
    page = new_page("support")
    page.goto(f"{live_server.url}/approvals/")
    card = page.locator(f"#approval-{approval.pk}")

    # The edit is checked against the tool's schema: amount must be at least 1.
    card.locator("details.edit summary").click()
    card.locator("textarea[name=args]").fill(json.dumps({"to": "bob", "amount": 0}))
    # A payment is high-risk: the approval is confirmed by typing the word (issue 21).
    card.locator("details.edit input[name=confirm]").fill("approve")
    card.locator("button:has-text('Approve edited')").click()
    page.locator(".flash .msg-error").wait_for()
    assert "amount" in page.locator(".flash").inner_text()
    approval.refresh_from_db()
    assert approval.status == "pending"

    card = page.locator(f"#approval-{approval.pk}")
    card.locator("details.edit summary").click()
    card.locator("textarea[name=args]").fill(json.dumps({"to": "bob", "amount": 50}, indent=2))
    card.locator(".diff-table tr.diff-changed").wait_for()
    assert "500" in card.locator(".diff-table").inner_text()
    card.locator("details.edit input[name=reason]").fill("the invoice says 50, not 500")
    shot(page, "inbox_edit_args")
    card.locator("details.edit input[name=confirm]").fill("approve")
    card.locator("button:has-text('Approve edited')").click()

    page.locator(".flash .msg-success").wait_for()
    assert page.locator(f"#approval-{approval.pk}").count() == 0
    assert "edited" in page.locator("table.grid").last.inner_text()
    shot(page, "inbox_edit_args_decided")
    approval.refresh_from_db()
    assert approval.status == "approved" and approval.decided_by.get_username() == "support"
    assert approval.proposed_args == {"to": "bob", "amount": 500}
    assert approval.approved_args == {"to": "bob", "amount": 50}
    tc = approval.tool_call
    tc.refresh_from_db()
    assert tc.args == {"to": "bob", "amount": 500}
    assert tc.approved_args == {"to": "bob", "amount": 50}
    assert drive(run) == "succeeded"
    assert [a for t, _, a in engine.world.effects if t == "pay"] == [{"to": "bob", "amount": 50}]


def test_world_page_lists_side_effects_and_links_to_the_run(new_page, live_server, people):
    run = make_run(goal="Refund order A-1001 <b>twice</b>")
    effect_record(kind="refund", key="3f9a" * 16, run_id=str(run.pk),
                  data={"order": "A-1001", "amount": 45}, idempotent=True)
    for n in (1, 2):
        effect_record(kind="email", key=f"{run.pk}:notify:{n}", run_id=str(run.pk),
                      data={"to": "a1001@example.com", "body": "<script>alert(1)</script>"},
                      idempotent=False)
    page = new_page("viewer")
    page.click(".mainnav >> text=World")
    rows = page.locator(".world-table tbody tr")
    assert rows.count() == 3
    assert rows.first.locator("td").nth(1).inner_text() == "email"
    rows.first.locator("details summary").click()
    assert "<script>alert(1)</script>" in rows.first.locator("pre.json").inner_text()
    shot(page, "world")
    rows.last.locator("a").click()
    page.wait_for_url(f"{live_server.url}/runs/{run.pk}/")
    card = page.locator("#world-effects")
    assert card.locator("tbody tr").count() == 3 and "refund" in card.inner_text()
    card.scroll_into_view_if_needed()
    shot(page, "run_world_card")
