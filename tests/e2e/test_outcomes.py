"""In a real browser: a run whose step was skipped shows as "completed with exceptions"."""
from __future__ import annotations

import pytest

from ledger.errors import ToolPermissionDenied
from runs.models import Run
from runs.services import run_start
from tests.console_factories import make_role_users
from tests.conftest import drive
from tests.e2e.conftest import shot
from tests.engine_agents import call, say

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True, serialized_rollback=True)]


def test_a_skipped_step_run_shows_completed_with_exceptions(engine, new_page, live_server):
    make_role_users()
    engine.world.fail_next["charge"] = [ToolPermissionDenied("permission denied")]
    engine.make_agent("e2e-refunder", {"refund": [call("charge", amount=250)],
                                       "notify": [say("told the customer")]},
                      plan=["refund", "notify"])
    run = run_start(agent="e2e-refunder", goal="Refund order 42")
    assert drive(run) == "blocked"

    page = new_page("operator")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.locator(".actions [data-verb=skip]").click()
    dialog = page.locator("dialog#confirm")
    dialog.wait_for(state="visible")
    assert "step refund was skipped" in dialog.locator("#carried-exceptions").inner_text()
    assert "notify" in dialog.locator("#next-steps").inner_text()
    dialog.locator("textarea[name=reason]").fill("no permission to refund; done by hand")
    dialog.locator("button[type=submit]").click()
    page.locator(".panel .pill-queued").wait_for()

    assert drive(run) == "completed_with_exceptions"
    page.goto(f"{live_server.url}/?tab=exceptions")
    tab = page.locator(".tab[data-tab=exceptions]")
    assert tab.get_attribute("aria-current") == "page"
    assert tab.locator(".count").inner_text() == "1"
    row = page.locator(f"tr[data-id='{run.pk}']")
    assert row.locator(".pill").inner_text() == "completed with exceptions"
    assert "1 exception" in row.inner_text()
    shot(page, "queue_completed_with_exceptions")
    page.goto(f"{live_server.url}/?tab=blocked")
    assert page.locator(f"tr[data-id='{run.pk}']").count() == 0

    page.goto(f"{live_server.url}/runs/{run.pk}/")
    assert page.locator(".panel .pill").inner_text() == "completed with exceptions"
    item = page.locator("#exceptions [data-exception=step_skipped]")
    assert "step refund was skipped" in item.inner_text()
    assert "operator" in item.inner_text() and "done by hand" in item.inner_text()
    assert Run.objects.get(pk=run.pk).exceptions[0]["who"] == "operator"
    shot(page, "run_completed_with_exceptions")
