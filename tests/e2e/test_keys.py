"""The keyboard in a real browser: the "?" sheet of each page, j/k/x/o on every list, keys
ignored while typing, and decide-and-next through the stuck runs (never one-key actions)."""
from __future__ import annotations

import datetime as dt
import re

import pytest

from approvals.models import Intervention
from runs.models import Run
from tests.console_factories import make_approval, make_attention_run, make_role_users
from tests.e2e.conftest import shot

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True, serialized_rollback=True)]


@pytest.fixture
def stuck():
    """Users in every role; two blocked runs and an unknown one, oldest first; an approval."""
    users = make_role_users()
    oldest = make_attention_run(goal="Refund order 42", age=dt.timedelta(hours=3))
    unknown = make_attention_run("unknown", goal="Email the refund confirmation",
                                 tool="send_email", recommended="confirm_not_executed",
                                 age=dt.timedelta(hours=2))
    newest = make_attention_run(goal="Charge order 77", age=dt.timedelta(hours=1))
    failed = make_attention_run(goal="A failed run", age=dt.timedelta(hours=4))
    Run.objects.filter(pk=failed.pk).update(status="failed", attention_reason="")
    waiting = make_attention_run("waiting", goal="Send a newsletter")
    approval = make_approval(waiting, tool="send_email")
    return {"users": users, "order": [oldest, unknown, newest], "failed": failed,
            "approval": approval}


def _sheet_keys(page) -> list[str]:
    page.keyboard.press("?")
    sheet = page.get_by_role("dialog", name="Keyboard shortcuts on this page")
    sheet.wait_for()
    keys = [k.split(",")[0] for k in
            sheet.locator("dt").evaluate_all("els => els.map(e => e.dataset.keys)")]
    page.keyboard.press("Escape")
    sheet.wait_for(state="hidden")
    return keys


def test_the_sheet_lists_the_keys_of_the_page(new_page, live_server, stuck):
    operator = new_page("operator")
    keys = _sheet_keys(operator)
    assert {"j", "k", "o", "x", "/", "?", "g q"} <= set(keys)
    assert not {"a", "r", "d"} & set(keys)
    operator.goto(f"{live_server.url}/runs/{stuck['order'][0].pk}/")
    assert {"d", "n", "j", "o"} <= set(_sheet_keys(operator))
    operator.keyboard.press("?")
    shot(operator, "keys_sheet_run")

    support = new_page("support")
    support.goto(f"{live_server.url}/approvals/")
    keys = _sheet_keys(support)
    assert {"a", "r", "j", "o"} <= set(keys) and "x" not in keys and "d" not in keys
    viewer = new_page("viewer")  # a viewer has nothing to decide: no "d" on a stuck run
    viewer.goto(f"{live_server.url}/runs/{stuck['order'][0].pk}/")
    keys = _sheet_keys(viewer)
    assert "d" not in keys and "n" in keys


LISTS = [  # (role, page, where "o" on the first row leads)
    ("operator", "/?tab=blocked", r"/runs/[0-9a-f-]{36}/$"),
    ("operator", "/?tab=failed", r"/runs/[0-9a-f-]{36}/$"),
    ("viewer", "/?tab=all&view=groups", r"/\?.*sig="),
    ("support", "/approvals/", r"/runs/[0-9a-f-]{36}/$"),
    ("admin", "/audit/", r"/runs/[0-9a-f-]{36}/$"),
    ("admin", "/settings/", r"/settings/budget/\d+/$"),
]


@pytest.mark.parametrize(("role", "path", "opens"), LISTS)
def test_j_k_o_on_every_list(new_page, live_server, stuck, role, path, opens):
    from runs.models import BudgetPolicy
    from tests.console_factories import make_intervention

    BudgetPolicy.objects.create(agent_name="support-bot", max_tokens=1000)
    make_intervention(actor=stuck["users"]["operator"], run=stuck["order"][0])
    page = new_page(role)
    page.goto(live_server.url + path)
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    focused = page.locator("[data-list] [data-row].is-focused")
    assert focused.count() == 1
    # The row has the real focus (a screen reader reads it), not only a highlight.
    assert focused.evaluate("el => el === document.activeElement")
    page.keyboard.press("o")
    page.wait_for_url(re.compile(r".*" + opens))


def test_x_selects_for_bulk_and_enter_opens(new_page, live_server, stuck):
    page = new_page("operator")
    page.keyboard.press("j")
    page.keyboard.press("x")
    assert page.locator("[data-selected-count]").inner_text() == "1 selected"
    assert page.locator("tr.is-focused input[name=run]").is_checked()
    page.keyboard.press("x")
    assert page.locator("[data-selected-count]").inner_text() == "0 selected"
    first = page.locator("tr.is-focused").get_attribute("data-id")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/runs/{first}/")
    # On the run page the ledger is a list too: o opens the focused call's details.
    page.keyboard.press("j")
    page.keyboard.press("o")
    assert page.locator("details.tc.is-focused[open]").count() == 1


def test_keys_are_ignored_while_typing(new_page, live_server, stuck):
    page = new_page("operator")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "search"
    page.keyboard.type("jxo?")
    assert page.locator("#search").input_value() == "jxo?"
    assert page.locator("[data-row].is-focused").count() == 0
    assert not page.locator("dialog#cheatsheet").is_visible()
    page.keyboard.press("Escape")  # leaves the field; keys work again
    page.keyboard.press("j")
    assert page.locator("[data-row].is-focused").count() == 1


def test_decide_and_next_walks_the_stuck_runs(new_page, live_server, stuck):
    oldest, unknown, newest = stuck["order"]
    page = new_page("operator")
    page.goto(f"{live_server.url}/runs/{newest.pk}/")
    page.keyboard.press("n")  # skips without deciding, wrapping round to the oldest
    page.wait_for_url(f"{live_server.url}/runs/{oldest.pk}/")
    page.keyboard.press("d")
    dialog = page.locator("dialog#confirm")
    dialog.wait_for(state="visible")
    # One key opened the confirm step and decided nothing.
    assert Intervention.objects.count() == 0
    assert Run.objects.get(pk=oldest.pk).status == "blocked"
    assert dialog.locator("h2").inner_text().startswith("Retry step")
    assert dialog.locator("[data-then-next]").is_checked()
    # The dialog has the keyboard: j does not move the page behind it, it types.
    page.keyboard.press("j")
    assert dialog.locator("textarea[name=reason]").input_value() == "j"
    dialog.locator("textarea[name=reason]").fill("the provider is back")
    shot(page, "keys_decide_dialog")
    dialog.locator("button[type=submit]").click()

    page.wait_for_url(f"{live_server.url}/runs/{unknown.pk}/")
    assert "Retry step: done." in page.locator(".flash").inner_text()
    assert Run.objects.get(pk=oldest.pk).status == "queued"
    page.keyboard.press("d")
    dialog.wait_for(state="visible")
    assert "did not execute" in dialog.locator("h2").inner_text()
    dialog.locator("textarea[name=reason]").fill("the mail log shows nothing sent")
    dialog.locator("input[name=confirm]").fill("again")  # no key: it may be sent twice
    dialog.locator("button[type=submit]").click()
    page.wait_for_url(f"{live_server.url}/runs/{newest.pk}/")

    assert page.locator("[data-next-stuck]").count() == 0  # the last one
    page.keyboard.press("d")
    dialog.wait_for(state="visible")
    dialog.locator("textarea[name=reason]").fill("retry the last one")
    dialog.locator("button[type=submit]").click()
    page.wait_for_url(f"{live_server.url}/")
    assert "No stuck runs are left." in page.locator(".flash").inner_text()
    assert Intervention.objects.count() == 3


def test_decide_without_then_next_stays_on_the_run(new_page, live_server, stuck):
    oldest = stuck["order"][0]
    page = new_page("operator")
    page.goto(f"{live_server.url}/runs/{oldest.pk}/")
    page.click("[data-verb=retry]")  # a click, not d: the box is offered but not ticked
    dialog = page.locator("dialog#confirm")
    dialog.wait_for(state="visible")
    assert not dialog.locator("[data-then-next]").is_checked()
    dialog.locator("textarea[name=reason]").fill("just this one")
    dialog.locator("button[type=submit]").click()
    page.locator(".panel .pill-queued").wait_for()
    assert page.url == f"{live_server.url}/runs/{oldest.pk}/"


def test_reading_pages_and_decide_and_next_work_without_javascript(browser, live_server,
                                                                  stuck):
    from tests.console_factories import PASSWORD

    context = browser.new_context(java_script_enabled=False,
                                  viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "operator")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    assert page.locator("table.runs tbody tr").count() == 2  # the blocked tab
    # Keyboard hints and the ? button need JavaScript: without it they are not shown.
    assert not page.locator("[data-action=cheatsheet]").is_visible()
    oldest, unknown, _ = stuck["order"]
    page.click(f'a[href="/runs/{oldest.pk}/"]')
    assert not page.locator(".key-hint").is_visible()
    page.click(".actions [data-decide]")  # a link to the confirm page
    page.wait_for_url(f"{live_server.url}/runs/{oldest.pk}/actions/retry/")
    page.check("[data-then-next]")
    page.fill("textarea[name=reason]", "no script needed")
    page.click("form[data-confirm-form] button[type=submit]")
    page.wait_for_url(f"{live_server.url}/runs/{unknown.pk}/")
    assert "Retry step: done." in page.locator(".flash").inner_text()
    context.close()
