"""Issue 31 item 7 in a real browser at 1280x720: picking a rollback checkpoint keeps the typed
reason and the submit button in view; Esc never silently discards a typed reason.

The run is made by the real loop (tests.ops_runs) and the console acts through the live server.
"""
from __future__ import annotations

import pytest

from runs.models import Event
from tests.console_factories import make_role_users
from tests.e2e.conftest import SCREENSHOTS
from tests.ops_runs import refund_then_blocked

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
