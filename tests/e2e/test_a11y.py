"""axe-core on every console page (tests/e2e/pages.py PAGES), signed in as each role.

The pages show the seeded demo (runs in every state, real ledgers, events and snapshots).
axe is the pinned copy in static/vendor/ (see its README), loaded from the page's own origin
so the console's strict Content-Security-Policy stays on while it runs.
"""
from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tests.console_factories import PASSWORD
from tests.e2e.pages import PAGES, ROLES, demo_world, open_page

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True, serialized_rollback=True)]
BLOCKING = ("serious", "critical")


@pytest.fixture
def world(engine):
    """The seeded demo, with the test password for its users (one per role)."""
    import agentops.demo.agents  # noqa: F401 - registers the demo agents

    seeded = demo_world()
    for user in User.objects.filter(username__in=ROLES):
        user.set_password(PASSWORD)
        user.save(update_fields=["password"])
    return seeded


def axe_violations(page) -> list[dict]:
    """Run axe on the page as it is now; return its serious and critical violations."""
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.add_script_tag(url="/static/vendor/axe.min.js")
    result = page.evaluate("async () => { const r = await axe.run(document); "
                           "return {violations: r.violations, passes: r.passes.length}; }")
    # axe really looked at a page (a blank or half-loaded one passes almost no rule).
    assert result["passes"] >= 15, f"axe passed only {result['passes']} rules on {page.url}"
    return [{"rule": v["id"], "impact": v["impact"], "help": v["help"],
             "where": [n["target"] for n in v["nodes"]][:5]}
            for v in result["violations"] if v["impact"] in BLOCKING]


def _report(failures: dict[str, list[dict]]) -> str:
    return "\n".join(f"{page}: {v['impact']} {v['rule']} ({v['help']}) at {v['where']}"
                     for page, found in failures.items() for v in found)


@pytest.mark.parametrize("role", ROLES)
def test_no_serious_violation_on_any_page(new_page, live_server, world, role):
    page = new_page(role)
    checked, failures = [], {}
    for spec in PAGES:
        if spec.anonymous or role not in spec.roles:
            continue
        open_page(page, live_server.url, spec, world)
        found = axe_violations(page)
        checked.append(spec.name)
        if found:
            failures[spec.name] = found
    print(f"{role}: axe checked {len(checked)} pages: {', '.join(checked)}")
    assert len(checked) >= 10
    assert not failures, _report(failures)


def test_no_serious_violation_signed_out(browser, live_server, world):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    failures = {}
    for spec in PAGES:
        if spec.anonymous:
            open_page(page, live_server.url, spec, world)
            found = axe_violations(page)
            if found:
                failures[spec.name] = found
    assert not failures, _report(failures)
    # The check can fail: a button without a name on the same page is a critical violation.
    page.evaluate("document.querySelector('main').insertAdjacentHTML('beforeend', "
                  "'<button type=\"button\"></button>')")
    assert [v["rule"] for v in axe_violations(page)] == ["button-name"]
    context.close()


def test_every_page_reads_without_javascript(browser, live_server, world):
    context = browser.new_context(java_script_enabled=False,
                                  viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    read = []
    for spec in PAGES:
        # Dialogs and sheets open with a click or a key (scripts); their no-script forms
        # are pages of their own in PAGES (confirm-page-*).
        if spec.anonymous or spec.click or spec.press or "admin" not in spec.roles:
            continue
        open_page(page, live_server.url, spec, world)
        assert page.locator("main h1, main h2, main .crumbs").first.is_visible(), spec.name
        read.append(spec.name)
    context.close()
    assert len(read) >= 30
