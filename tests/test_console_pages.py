"""Every named URL of the project is a page in tests/e2e/pages.py (checked by axe and
photographed by `make screens`) or is listed there as not a page, with the reason."""
from __future__ import annotations

from django.urls import URLPattern, URLResolver, get_resolver

from tests.e2e.pages import NOT_PAGES, NOT_PAGE_NAMESPACES, PAGES


def _named(patterns, namespace: str = ""):
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _named(p.url_patterns, p.namespace or namespace)
        elif isinstance(p, URLPattern) and p.name:
            yield namespace, p.name


def test_every_named_url_is_a_page_or_says_why_not():
    named = set(_named(get_resolver().url_patterns))
    pages = {("console", p.url_name) for p in PAGES}
    excused = {("console", n) for n in NOT_PAGES}
    forgotten = {f"{ns}:{n}" if ns else n for ns, n in named - pages - excused
                 if (ns or n) not in NOT_PAGE_NAMESPACES}
    assert forgotten == set(), "add a row to tests/e2e/pages.py PAGES (or NOT_PAGES, why)"
    assert excused <= named and pages <= named  # no stale rows
    assert not pages & excused


def test_page_names_are_unique():
    assert len({p.name for p in PAGES}) == len(PAGES)
