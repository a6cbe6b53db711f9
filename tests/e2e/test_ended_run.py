"""Issue 31 Build 3 in a real browser at 1280x720: a terminated run says, above the fold, who
ended it, when, why, the refund that still stands (tool, key, amount) and the step not done.
"""
from __future__ import annotations

import pytest

from ledger.models import ToolCall
from tests.console_factories import make_role_users
from tests.e2e.conftest import SCREENSHOTS
from tests.ops_runs import refund_then_blocked

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True, serialized_rollback=True)]
SMALL = {"width": 1280, "height": 720}


def test_terminated_run_shows_what_stands_above_the_fold(engine, new_page, live_server):
    make_role_users()
    run = refund_then_blocked()
    refund = ToolCall.objects.get(run=run, tool="refund")
    page = new_page("operator")
    page.set_viewport_size(SMALL)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.locator(".actions [data-verb=terminate]").click()
    dialog = page.locator("dialog#confirm")
    dialog.wait_for(state="visible")
    dialog.locator("textarea[name=reason]").fill("the customer withdrew the return")
    dialog.locator("input[name=confirm]").fill("terminate")
    dialog.locator("button[type=submit]").click()
    page.locator(".panel .pill-cancelled").wait_for()
    stands = page.locator("#what-stands")
    stands.wait_for()
    box = stands.bounding_box()
    assert box["y"] + box["height"] <= SMALL["height"], box  # above the fold
    ended = stands.locator("[data-ended]").inner_text()
    assert ended.startswith("Cancelled by operator") and "the customer withdrew the return" in ended
    standing = stands.locator("[data-stands-kind=standing]").inner_text()
    assert "refund 250" in standing and refund.idempotency_key[-10:] in standing
    assert "notify" in stands.locator("[data-stands-kind=not-done]").inner_text()
    page.screenshot(path=str(SCREENSHOTS / "ended_run_what_stands_1280x720.png"))
