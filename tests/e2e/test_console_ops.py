"""Operator work of issue 21 in a real browser: roll back to before a refund (the preview
fully visible at 1280x720), bulk confirm and per-run results, typed confirmation of an
irreversible action, the next retry time, and the evidence of a loop and of a stall.

The runs are made by the real loop (scripted model, tests.engine_agents' world) and driven
in-process; the console acts on them through the live server.
"""
from __future__ import annotations

import re

import pytest

from approvals.models import Intervention
from ledger.models import ToolCall
from runs.models import Event, Run, Snapshot
from tests.approvals.conftest import blocked_run, unknown_run
from tests.console_factories import make_role_users
from tests.e2e.conftest import SCREENSHOTS
from tests.engine_agents import world
from tests.ops_runs import backing_off, looping, refund_then_blocked, stalled

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True, serialized_rollback=True)]
SMALL = {"width": 1280, "height": 720}


@pytest.fixture
def people() -> dict:
    """One signed-up user per role (viewer, operator, support, admin) plus 'nobody'."""
    return make_role_users()


def _fits(page, selector: str) -> None:
    """Assert every element matching ``selector`` lies fully inside the viewport's width and
    inside its dialog (nothing cut off or scrolled away sideways)."""
    view = page.viewport_size
    dialog = page.locator("dialog#confirm").bounding_box()
    for box in [el.bounding_box() for el in page.locator(selector).all()]:
        assert box["x"] >= dialog["x"] and box["x"] + box["width"] <= dialog["x"] + dialog["width"]
        assert box["x"] + box["width"] <= view["width"]


def test_operator_rolls_back_to_before_the_refund(engine, new_page, live_server, people):
    run = refund_then_blocked()
    refund = ToolCall.objects.get(run=run, tool="refund")
    page = new_page("operator")
    page.set_viewport_size(SMALL)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.locator(".actions [data-verb=rollback]").click()
    dialog = page.locator("dialog#confirm")
    dialog.wait_for(state="visible")
    picker = dialog.locator("select[name=to_seq]")
    labels = [t.split(" — ")[0] for t in picker.locator("option").all_inner_texts()]
    assert labels == ["before step 3 · notify (Tell the customer)",
                      "before step 2 · refund_customer (Refund the customer)",
                      "before step 1 · check (Check the policy)"]
    before_refund = Event.objects.get(run=run, type="step.started",
                                      data__step="refund_customer").seq - 1
    picker.select_option(str(before_refund))
    row = dialog.locator(f'tr[data-call="{refund.tool_call_id}"]')
    row.wait_for()
    assert "undone by its compensation" in row.inner_text() and "idempotent" in row.inner_text()
    email = ToolCall.objects.get(run=run, tool="email")
    dialog.locator(f'tr[data-call="{email.tool_call_id}"] input[name=ticked]').check()
    _fits(page, ".rerun-table th, .rerun-table td")
    page.screenshot(path=str(SCREENSHOTS / "ops_rollback_preview_1280x720.png"))
    dialog.locator("textarea[name=reason]").fill("refunded the wrong order")
    dialog.locator("input[name=confirm]").fill("25")  # not the amount: refused by the server
    dialog.locator("button[type=submit]").click()
    dialog.locator(".msg-error").wait_for()
    assert "“25” does not confirm Roll back" in dialog.locator(".msg-error").inner_text()
    assert world.count("unrefund") == 0 and not Intervention.objects.filter(run=run).exists()
    dialog.locator("input[name=confirm]").fill("250")
    dialog.locator("button[type=submit]").click()
    page.screenshot(path=str(SCREENSHOTS / "ops_rollback_after_submit.png"))
    page.locator(".panel .pill-blocked").wait_for()  # held at the checkpoint for a person
    assert "Roll back: done." in page.locator(".flash").inner_text()
    refund.refresh_from_db()
    assert refund.status == "compensated" and world.count("unrefund") == 1


def test_terminate_asks_for_the_word_in_the_dialog(engine, new_page, live_server, people):
    run = blocked_run("e2e-term")
    page = new_page("operator")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.locator(".actions [data-verb=terminate]").click()
    dialog = page.locator("dialog#confirm")
    dialog.wait_for(state="visible")
    assert "Type “terminate” to terminate" in dialog.inner_text()
    dialog.locator("textarea[name=reason]").fill("customer withdrew")
    dialog.locator("button[type=submit]").click()  # the field is required: nothing is sent
    assert dialog.locator("input[name=confirm]").evaluate("el => !el.validity.valid")
    run.refresh_from_db()
    assert run.status == "blocked"
    dialog.locator("input[name=confirm]").fill("terminate")
    dialog.locator("button[type=submit]").click()
    page.locator(".panel .pill-cancelled").wait_for()
    assert Intervention.objects.get(run=run).action == "run.terminate"


def test_bulk_retry_lists_runs_and_calls_then_reports_each(engine, new_page, live_server, people):
    a, b, odd = blocked_run("e2e-bulk"), blocked_run("e2e-bulk"), unknown_run("e2e-bulk-odd")
    newer = blocked_run("e2e-bulk-newer")
    Snapshot.objects.filter(run=newer).update(schema_version=99)  # written by a newer AgentOps
    page = new_page("operator")
    page.goto(f"{live_server.url}/?tab=all")
    for run in (a, b, odd, newer):
        page.locator(f'input[name=run][value="{run.pk}"]').check()
    page.locator("[data-bulk-submit]").click()
    page.wait_for_url(re.compile(r".*/bulk/.*"))
    table = page.locator("table[data-bulk-runs]")
    assert table.locator("tbody tr").count() == 4
    page.locator("select[name=verb]").select_option("retry")  # htmx reloads the preview
    page.locator('tr[data-run] .call-line').first.wait_for()
    for run in (a, b):
        line = table.locator(f'tr[data-run="{run.pk}"]')
        assert "lookup read runs again" in " ".join(line.inner_text().split())
    assert "Refused:" in table.locator(f'tr[data-run="{odd.pk}"]').inner_text()
    page.screenshot(path=str(SCREENSHOTS / "ops_bulk_confirm.png"), full_page=True)
    page.locator("textarea[name=bulk_reason]").fill("region access granted")
    page.locator("button:has-text('Retry step: apply to 4 runs')").click()
    page.locator("[data-tally]").wait_for()
    assert page.locator("[data-tally]").inner_text() == "2 done · 1 refused · 1 error"
    assert "state schema 99 is newer" in page.locator(
        f'tr[data-result="error"][data-run="{newer.pk}"]').inner_text()
    for run in (a, b):
        done = page.locator(f'tr[data-result="done"][data-run="{run.pk}"]')
        assert "lookup (read): runs again" in done.inner_text()
    assert "retry applies to" in page.locator(
        f'tr[data-result="refused"][data-run="{odd.pk}"]').inner_text()
    page.screenshot(path=str(SCREENSHOTS / "ops_bulk_results.png"), full_page=True)
    assert {Run.objects.get(pk=r.pk).status for r in (a, b)} == {"queued"}


def test_next_retry_time_on_the_run_and_the_queue(engine, new_page, live_server, people):
    run = backing_off(delay_s=600)
    call = ToolCall.objects.get(run=run, tool="lookup")
    stamp = call.not_before.strftime("%Y-%m-%d %H:%M:%S UTC")
    page = new_page("operator")
    page.goto(f"{live_server.url}/?tab=waiting")
    cell = page.locator(f'tr[data-id="{run.pk}"] [data-next-try] time')
    assert cell.get_attribute("title") == stamp
    assert re.fullmatch(r"in (9m \d+s|10m 0s)", cell.inner_text())
    page.set_viewport_size(SMALL)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    retry = page.locator("dd[data-next-retry]")
    assert f"at {stamp}" in retry.inner_text() and "lookup attempt 2 in 9m" in retry.inner_text()
    assert retry.bounding_box()["y"] + retry.bounding_box()["height"] <= SMALL["height"]
    wake = page.locator(".actions [data-verb=wake]")
    assert wake.bounding_box()["y"] + wake.bounding_box()["height"] <= SMALL["height"]
    page.screenshot(path=str(SCREENSHOTS / "ops_next_retry_1280x720.png"))


def test_loop_evidence_side_by_side_with_actions_above_the_fold(engine, new_page, live_server,
                                                               people):
    run = looping()
    page = new_page("operator")
    page.set_viewport_size(SMALL)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    evidence = page.locator("details[data-evidence=loop]")
    assert evidence.get_attribute("open") is not None
    heads = evidence.locator("thead th").all_inner_texts()[1:]
    assert [h.split(" · ")[0] for h in heads] == ["turn 1", "turn 2", "turn 3"]
    assert evidence.locator("td[data-result]").all_inner_texts() == [
        "succeeded: A-7 costs 42", "succeeded: A-7 costs 42", "not run: the loop guard stopped it"]
    panel = page.locator(".panel").bounding_box()
    assert panel["y"] + panel["height"] <= SMALL["height"]  # buttons and evidence in view
    page.screenshot(path=str(SCREENSHOTS / "ops_loop_evidence_1280x720.png"))
    evidence.locator("summary").click()  # folds away for the rest of the page
    assert evidence.get_attribute("open") is None


def test_stall_evidence_lists_the_unproductive_rounds(engine, new_page, live_server, people):
    run = stalled()
    page = new_page("operator")
    page.set_viewport_size(SMALL)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    rounds = page.locator("details[data-evidence=stall] tr[data-round]")
    assert rounds.count() == 5
    assert "same facts as turn 1" in rounds.last.inner_text()
    assert "poll" in rounds.last.inner_text()
    panel = page.locator(".panel").bounding_box()
    assert panel["y"] + panel["height"] <= SMALL["height"]  # the panel stays above the fold
    page.screenshot(path=str(SCREENSHOTS / "ops_stall_evidence_1280x720.png"))


def test_evidence_next_retry_and_bulk_preview_read_without_javascript(engine, browser,
                                                                     live_server, people):
    from tests.console_factories import PASSWORD

    loop, waiting = looping(), backing_off(delay_s=300)
    context = browser.new_context(java_script_enabled=False, viewport=SMALL)
    try:
        page = context.new_page()
        page.set_default_timeout(10_000)
        page.goto(f"{live_server.url}/login/")
        page.fill("input[name=username]", "operator")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        page.goto(f"{live_server.url}/runs/{loop.pk}/")
        assert page.locator("details[data-evidence=loop] td[data-result]").count() == 3
        page.goto(f"{live_server.url}/runs/{waiting.pk}/")
        assert "lookup attempt 2 in 4m" in page.locator("dd[data-next-retry]").inner_text()
        page.goto(f"{live_server.url}/bulk/?run={loop.pk}&run={waiting.pk}")
        page.locator("select[name=verb]").select_option("terminate")
        page.locator("button:has-text('Show what it does')").click()  # a plain GET form
        page.wait_for_url(re.compile(r".*verb=terminate.*"))
        assert page.locator("table[data-bulk-runs] tbody tr").count() == 2
        assert "Type “terminate” to terminate" in page.locator("label.confirm-typed").inner_text()
    finally:
        context.close()
