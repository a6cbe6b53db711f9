"""The run list, full history and dark theme in a real browser (issue 21): filters and cursor
pages in the URL, a saved view, a run's searchable history with its raw JSON (also with
JavaScript off), and the dark theme from the browser's preference or the toggle."""
from __future__ import annotations

import re

import pytest

from runs.models import Run
from tests.console_factories import (
    PASSWORD,
    make_attention_run,
    make_event_history,
    make_role_users,
    make_runs_bulk,
    make_user,
)
from tests.e2e.conftest import shot
from tests.test_contrast import AA, contrast

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True, serialized_rollback=True)]


def _login(browser, live_server, username: str, **context_options):
    context = browser.new_context(**{"viewport": {"width": 1280, "height": 720},
                                     **context_options})
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    return context, page


def _hex(css_rgb: str) -> str:
    r, g, b = (int(x) for x in re.findall(r"\d+", css_rgb)[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


def test_filter_page_save_open_and_delete_a_view(browser, live_server):
    make_role_users()
    alice = make_user("alice")
    make_runs_bulk(70, created_by=alice)
    make_runs_bulk(5, agent="billing-bot", start=100)
    context, page = _login(browser, live_server, "viewer")
    page.locator('a[data-tab="failed"]').click()
    page.wait_for_url(re.compile(r".*tab=failed.*"))
    page.fill("input[name=owner]", "alice")
    page.locator("form.filters button[type=submit]").click()
    page.wait_for_url(re.compile(r".*owner=alice.*"))
    rows = page.locator("table.runs tbody tr[data-row]")
    assert rows.count() == 50
    first_page = rows.first.get_attribute("data-id")
    page.keyboard.press("j")  # the list keys work on these rows
    assert page.locator("tr.is-focused").get_attribute("data-id") == first_page
    page.locator("a[data-next-page]").click()
    page.wait_for_url(re.compile(r".*cursor=.*owner=alice.*|.*owner=alice.*cursor=.*"))
    assert rows.count() == 20 and first_page not in page.content()
    page.locator("a[data-first-page]").click()
    page.wait_for_url(lambda url: "cursor=" not in url)
    page.fill("input[name=name]", "Alice's failures")
    page.locator("form.save-view button").click()
    page.locator(".flash .msg-success").wait_for()
    saved = page.locator('a[data-saved-view="Alice\'s failures"]')
    assert saved.get_attribute("aria-current") == "true"
    shot(page, "lists_saved_view")
    page.goto(f"{live_server.url}/")
    saved.click()
    page.wait_for_url(re.compile(r".*/\?tab=failed&owner=alice$"))
    assert rows.count() == 50
    page.goto(f"{live_server.url}/?tab=failed&since=someday")
    assert "since “someday” is not a date" in page.locator("[data-query-error]").inner_text()
    page.locator('button[aria-label="Delete saved view Alice\'s failures"]').click()
    page.locator(".flash .msg-success").wait_for()
    assert saved.count() == 0
    context.close()


def test_full_history_search_and_raw_json_with_and_without_javascript(browser, live_server):
    make_role_users()
    run = make_attention_run(goal="Refund order A-7")
    make_event_history(run, 80)
    last = Run.objects.get(pk=run.pk).last_seq
    context, page = _login(browser, live_server, "viewer")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.locator("a[data-history-link]").click()
    page.wait_for_url(re.compile(rf".*/runs/{run.pk}/history/$"))
    assert page.locator("table.history tr[data-row]").count() == 50
    page.select_option("select[name=type]", "tool.started")
    page.fill("#search", "send_email")
    page.locator("form.filters button[type=submit]").click()
    page.wait_for_url(re.compile(r".*type=tool.started.*q=send_email.*"))
    rows = page.locator("table.history tr[data-row]")
    assert rows.count() == 20 and "Tool call started" in rows.first.inner_text()
    rows.first.locator("summary").click()
    raw = rows.first.locator("pre.json")
    assert raw.is_visible() and '"type": "tool.started"' in raw.inner_text()
    shot(page, "lists_history")
    context.close()
    # Without JavaScript: the same page, the pager, and <details> still open natively.
    context, page = _login(browser, live_server, "viewer", java_script_enabled=False)
    page.goto(f"{live_server.url}/runs/{run.pk}/history/?order=newest")
    assert page.locator("table.history tr[data-row]").first.get_attribute("data-id") == str(last)
    page.locator("a[data-next-page]").click()
    page.wait_for_url(re.compile(r".*after=.*"))
    row = page.locator("table.history tr[data-row]").first
    row.locator("summary").click()
    assert row.locator("pre.json").is_visible()
    context.close()


def _background(page) -> str:
    return page.evaluate("getComputedStyle(document.documentElement).backgroundColor")


def test_dark_theme_follows_the_browser_and_the_toggle_persists(browser, live_server):
    make_role_users()
    run = make_attention_run(goal="Refund order 42")
    context, page = _login(browser, live_server, "operator", color_scheme="dark")
    assert _background(page) == "rgb(15, 18, 24)"  # the preference alone: dark
    pill = page.locator("table.runs .pill").first
    fg, bg = (_hex(pill.evaluate(f"el => getComputedStyle(el).{p}"))
              for p in ("color", "backgroundColor"))
    assert contrast(fg, bg) >= AA
    muted = _hex(page.locator(".bulkbar .muted").evaluate("el => getComputedStyle(el).color"))
    assert contrast(muted, "#181c24") >= AA
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    # The run panel, actions included, still fits above the fold at 1280x720.
    box = page.locator(".panel .actions").bounding_box()
    assert box and box["y"] + box["height"] <= 720
    shot(page, "lists_dark_run")
    page.locator("[data-theme-toggle]").click()  # auto -> dark (chosen now)
    page.wait_for_url(re.compile(rf".*/runs/{run.pk}/$"))
    assert page.locator("html").get_attribute("data-theme") == "dark"
    page.locator("[data-theme-toggle]").click()  # dark -> light, against the preference
    page.wait_for_url(re.compile(rf".*/runs/{run.pk}/$"))
    assert _background(page) == "rgb(246, 247, 249)"
    page.reload()
    assert _background(page) == "rgb(246, 247, 249)"
    other = context.new_page()
    other.goto(f"{live_server.url}/approvals/")
    assert _background(other) == "rgb(246, 247, 249)"  # the choice holds on every page
    context.close()
    context, page = _login(browser, live_server, "viewer", color_scheme="light")
    assert _background(page) == "rgb(246, 247, 249)"
    page.locator("[data-theme-toggle]").click()
    page.wait_for_url(f"{live_server.url}/")
    assert _background(page) == "rgb(15, 18, 24)"
    shot(page, "lists_dark_queue")
    context.close()


def test_saved_views_and_the_theme_toggle_work_without_javascript(browser, live_server):
    make_role_users()
    make_runs_bulk(3, agent="billing-bot")
    context, page = _login(browser, live_server, "viewer", java_script_enabled=False)
    page.goto(f"{live_server.url}/?tab=failed&agent=billing-bot")
    page.fill("input[name=name]", "Billing")
    page.locator("form.save-view button").click()
    page.wait_for_url(f"{live_server.url}/?tab=failed&agent=billing-bot")
    page.goto(f"{live_server.url}/")
    page.locator('a[data-saved-view="Billing"]').click()
    page.wait_for_url(f"{live_server.url}/?tab=failed&agent=billing-bot")
    assert page.locator("table.runs tbody tr[data-row]").count() == 3
    page.locator("[data-theme-toggle]").click()
    page.wait_for_url(f"{live_server.url}/?tab=failed&agent=billing-bot")
    assert page.locator("html").get_attribute("data-theme") == "dark"
    page.locator('button[aria-label="Delete saved view Billing"]').click()
    page.wait_for_url(f"{live_server.url}/?tab=failed&agent=billing-bot")
    assert page.locator("a[data-saved-view]").count() == 0
    context.close()
