"""Issue 31 item 7 in a real browser at 1280x720: picking a rollback checkpoint keeps the typed
reason and the submit button in view; Esc never silently discards a typed reason. Issue 32
item 1: the Edit plan dialog shows the diff, its reason field is not hidden under the
buttons, and the run goes on with the edited plan.

The run is made by the real loop (tests.ops_runs) and the console acts through the live server.
"""
from __future__ import annotations

import pytest

from approvals.models import Intervention
from runs.models import Event, Run, Step
from tests.conftest import drive
from tests.console_factories import make_role_users
from tests.e2e.conftest import SCREENSHOTS
from tests.e2e.workers import wait_until
from tests.ops_runs import planned_then_blocked, refund_then_blocked

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True, serialized_rollback=True)]
SMALL = {"width": 1280, "height": 720}
REASON = "refunded the wrong order; the customer asked for store credit"


def _in_view(page, locator) -> None:
    box = locator.bounding_box()
    assert box is not None and box["y"] >= 0
    assert box["y"] + box["height"] <= page.viewport_size["height"], box


def test_picking_a_checkpoint_keeps_the_reason_and_the_button(engine, new_page, live_server):
    make_role_users()
    run = refund_then_blocked()
    page = new_page("operator")
    page.set_viewport_size(SMALL)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.locator(".actions [data-verb=rollback]").click()
    dialog = page.locator("dialog#confirm")
    dialog.wait_for(state="visible")
    dialog.locator("textarea[name=reason]").fill(REASON)
    before_refund = Event.objects.get(run=run, type="step.started",
                                      data__step="refund_customer").seq - 1
    with page.expect_response(lambda r: "/actions/rollback" in r.url or "rollback" in r.url):
        dialog.locator("select[name=to_seq]").select_option(str(before_refund))
    dialog.locator("tr[data-call]").first.wait_for()
    assert dialog.locator("textarea[name=reason]").input_value() == REASON
    _in_view(page, dialog.locator("button[type=submit]"))
    page.screenshot(path=str(SCREENSHOTS / "ops_rollback_checkpoint_keeps_reason_1280x720.png"))


def test_esc_asks_before_closing_and_the_reason_comes_back(engine, new_page, live_server):
    make_role_users()
    run = refund_then_blocked()
    page = new_page("operator")
    page.set_viewport_size(SMALL)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.locator(".actions [data-verb=terminate]").click()
    dialog = page.locator("dialog#confirm")
    dialog.wait_for(state="visible")
    reason = dialog.locator("textarea[name=reason]")
    reason.fill(REASON)
    page.keyboard.press("Escape")
    # The first Esc asks instead of closing; what was typed is still there.
    dialog.locator("[data-esc-note]").wait_for()
    assert dialog.is_visible() and reason.input_value() == REASON
    page.keyboard.press("Escape")
    dialog.wait_for(state="hidden")
    # Reopened, the same action has the reason back.
    page.locator(".actions [data-verb=terminate]").click()
    dialog.wait_for(state="visible")
    dialog.locator("textarea[name=reason]").wait_for()
    assert dialog.locator("textarea[name=reason]").input_value() == REASON


def _clear_of_the_buttons(dialog, field) -> None:
    """The field shows whole inside the dialog, above its sticky row of buttons."""
    box = field.evaluate("""el => { const f = el.getBoundingClientRect();
        const row = el.closest('form').querySelector(':scope > .row:last-child');
        const d = el.closest('dialog').getBoundingClientRect();
        return {top: f.top, bottom: f.bottom, buttons: row.getBoundingClientRect().top,
                dialog: d.top}; }""")
    assert box["top"] >= box["dialog"] and box["bottom"] <= box["buttons"], box


def test_the_edit_plan_dialog_shows_the_diff_and_the_run_goes_on(engine, new_page,
                                                                 live_server):
    make_role_users()
    run = planned_then_blocked()
    page = new_page("operator")
    page.set_viewport_size(SMALL)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.locator(".actions [data-verb=edit_plan]").click()
    dialog = page.locator("dialog#confirm")
    dialog.wait_for(state="visible")
    reason = dialog.locator("textarea[name=reason]")
    page.wait_for_function("document.activeElement && document.activeElement.name === 'reason'")
    _clear_of_the_buttons(dialog, reason)  # the field the dialog focuses is the one in view
    assert dialog.locator("[data-plan-text]").input_value() == "check\npack\nlabel\nship\nnotify"
    dialog.locator("[data-plan-text]").fill("check\nship: by courier, no label\nnotify")
    with page.expect_response(lambda r: "/actions/edit_plan" in r.url or "edit_plan" in r.url):
        dialog.locator("[data-plan-preview]").click()
    dialog.locator("tr[data-plan-step=ship][data-change=edited]").wait_for()
    changes = dict(zip(dialog.locator("tr[data-plan-step]").evaluate_all(
        "rows => rows.map(r => r.dataset.planStep)"), dialog.locator(
        "tr[data-plan-step]").evaluate_all("rows => rows.map(r => r.dataset.change)")))
    assert changes == {"check": "kept", "ship": "edited", "notify": "moved",
                       "pack": "removed", "label": "removed"}
    _clear_of_the_buttons(dialog, reason)
    page.screenshot(path=str(SCREENSHOTS / "ops_edit_plan_diff_1280x720.png"))
    reason.fill("the parcel goes by courier; no label needed")
    dialog.locator("button[type=submit]").click()
    wait_until(lambda: Run.objects.get(pk=run.pk).plan_version == 2, 10, "the plan edit")
    assert Intervention.objects.get(run=run).action == "run.edit_plan"
    assert drive(run) == "succeeded"
    assert list(Step.objects.filter(run=run).values_list("key", flat=True)) == [
        "check", "ship", "notify"]
