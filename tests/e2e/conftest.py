"""Browser tests: Playwright driving Debian's /usr/bin/chromium against pytest-django's live server.

Skipped (with the reason) when Chromium is absent outside CI; in CI (CI=true) a missing
browser is a failure, so `make test` cannot pass silently without the browser tests.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).parent / "screenshots"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _missing() -> str:
    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} is missing (run scripts/ensure_chromium.sh)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is not installed"
    return ""


def pytest_collection_modifyitems(config, items):
    """Skip the browser tests on a machine without Chromium, unless this is CI."""
    reason = _missing()
    if not reason or os.environ.get("CI") == "true":
        return
    skip = pytest.mark.skip(reason=f"browser tests skipped: {reason}")
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def browser() -> Iterator["object"]:
    """A headless Chromium for this module (Debian's binary; never a downloaded browser)."""
    reason = _missing()
    if reason:
        pytest.fail(f"CI=true but {reason}")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop in this thread; the ORM calls that build
    # test data run beside it on purpose, so Django's async-safety guard is relaxed here only.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    SCREENSHOTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def new_page(browser, live_server):
    """Return a function that opens a signed-in page for a username in its own context."""
    from tests.console_factories import PASSWORD

    contexts = []

    def open_as(username: str):
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(10_000)
        page.goto(f"{live_server.url}/login/")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        return page

    yield open_as
    for context in contexts:
        context.close()


def shot(page, name: str) -> None:
    """Save a full-page screenshot under tests/e2e/screenshots/."""
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def pytest_configure(config):
    """Register the e2e marker (also listed in pyproject.toml)."""
    config.addinivalue_line("markers", "e2e: browser tests (Playwright + Debian Chromium)")


@pytest.fixture
def chaos_world(settings):
    """The chaos agents' world table, and ticks enqueued to q2 as a worker host takes them."""
    from tests import chaos_agents

    settings.AGENTOPS_ENQUEUE_TICKS = True
    chaos_agents.world_create()
    yield chaos_agents
    chaos_agents.world_drop()
