"""The trace view in headless Chromium: a 30-call run's waterfall at 1280x720.

Every row of a run with 15 model calls and 15 tool attempts (one a retry) is above the fold;
axe finds nothing serious; j/k walk the rows and Enter opens a model call's request and reply;
with JavaScript off the same table is there and a model call still opens.
"""
from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from runs.services import run_start
from tests.conftest import drive
from tests.console_factories import PASSWORD
from tests.e2e.conftest import shot
from tests.e2e.test_a11y import axe_violations

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
_seen: set[str] = set()


@tool(effect="read")
def page_of(ctx, n: int) -> ToolResult:
    """Read page ``n`` of a report; page 3's first attempt loses its connection."""
    if n == 3 and ctx.tool_call_id not in _seen:
        _seen.add(ctx.tool_call_id)
        raise ConnectionError("connection reset")
    return ToolResult(facts={"page": n}, summary=f"page {n} read")


@pytest.fixture
def run(engine):
    registry.register(Agent(
        name="trace-30", version="1", system_prompt="Read the fourteen pages.", tools=[page_of],
        plan=[StepSpec("read")], max_turns_per_step=40,
        model=lambda: ScriptedModel({"read": [*(call("page_of", n=i) for i in range(1, 15)),
                                              say("read all fourteen pages")]})))
    run = run_start(agent="trace-30", goal="read the report")
    assert drive(run) == "succeeded"
    User.objects.create_superuser("tracer", password=PASSWORD)
    return run


def _signed_in(browser, live_server, *, js: bool = True):
    context = browser.new_context(viewport={"width": 1280, "height": 720}, java_script_enabled=js)
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "tracer")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    return context, page


def test_a_30_call_run_fits_above_the_fold_and_passes_axe(browser, live_server, run):
    context, page = _signed_in(browser, live_server)
    try:
        page.goto(f"{live_server.url}/runs/{run.pk}/trace/")
        rows = page.locator("table.trace tbody tr[data-row]")
        assert rows.count() == 31  # the step, 15 model calls, 15 tool attempts
        assert page.locator(".tr-model").count() == 15 and page.locator(".tr-tool").count() == 15
        assert "page_of · attempt 2 (retry)" in page.inner_text("table.trace")
        last = rows.nth(30).bounding_box()
        assert last["y"] + last["height"] <= 720, f"the last row ends at {last['y'] + last['height']}px"
        page.screenshot(path=str(__import__("pathlib").Path(__file__).parent / "screenshots"
                                 / "trace-30-calls-fold.png"))
        assert axe_violations(page) == []
        page.keyboard.press("j")
        page.keyboard.press("j")  # the first model call's row
        focused = page.evaluate("document.activeElement.className")
        assert "tr-model" in focused
        page.keyboard.press("Enter")
        io = page.locator("tr.tr-model").first.locator("details[open] .trace-io")
        assert io.is_visible()
        assert "page_of(" in io.inner_text()
        assert axe_violations(page) == []
        shot(page, "trace-30-calls-open")
    finally:
        context.close()


def test_without_javascript_the_waterfall_is_a_table_whose_calls_open(browser, live_server, run):
    context, page = _signed_in(browser, live_server, js=False)
    try:
        page.goto(f"{live_server.url}/runs/{run.pk}/trace/")
        assert page.locator("table.trace tbody tr").count() == 31
        assert page.locator("table.trace svg rect").count() == 31
        page.locator("tr.tr-model summary").first.click()
        assert page.locator("tr.tr-model details[open] .trace-io").first.is_visible()
    finally:
        context.close()
