"""The run list at scale (issue 21): keyset pages on every tab that stay put while runs are
inserted, every filter in the URL, a page in bounded queries at thousands of runs, and saved
views per user with a clear error for a bad query string."""
from __future__ import annotations

import datetime as dt
import re
import uuid
from urllib.parse import parse_qs

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.errors import InvalidListQuery, SavedViewNameTaken
from runs.list_filters import list_query_parse
from runs.models import Run, SavedView
from runs.services_saved_views import saved_view_create
from tests.console_factories import RUNS_T0, client_for, make_runs_bulk, make_user

pytestmark = pytest.mark.django_db


def _rows(html: str) -> list[str]:
    return re.findall(r'<tr data-row data-href="/runs/([0-9a-f-]{36})/"', html)


def _next(html: str) -> str | None:
    found = re.search(r'href="\?([^"]+)" rel="next" data-next-page', html)
    return found.group(1).replace("&amp;", "&") if found else None


@pytest.mark.parametrize("tab", ["failed", "succeeded", "exceptions", "cancelled", "blocked",
                                 "all"])
def test_every_tab_pages_by_cursor_and_stays_put_while_runs_are_inserted(users, tab):
    status = {"exceptions": "completed_with_exceptions", "all": "failed"}.get(tab, tab)
    seeded = make_runs_bulk(120, status=status)
    newest_first = [str(r.pk) for r in sorted(seeded, key=lambda r: r.updated_at,
                                              reverse=tab != "blocked")]
    client = client_for(users["viewer"])
    with CaptureQueriesContext(connection) as sql:
        first = client.get(reverse("console:queue"), {"tab": tab}).content.decode()
    assert not [q["sql"] for q in sql.captured_queries if "OFFSET" in q["sql"].upper()]
    seen = _rows(first)
    assert seen == newest_first[:50]
    # New runs arrive between two page loads: the next page is still the next 50.
    make_runs_bulk(7, status=status, start=500)
    make_runs_bulk(3, status=status, start=-500)
    query = _next(first)
    while query:
        html = client.get(f"{reverse('console:queue')}?{query}").content.decode()
        seen += _rows(html)
        query = _next(html)
    assert len(seen) == len(set(seen))
    original = [r for r in seen if r in set(newest_first)]
    assert original == newest_first
    assert "data-first-page" in html


def test_filters_travel_in_the_url_and_narrow_the_list(users):
    alice = make_user("alice")
    make_runs_bulk(3, agent="billing-bot", created_by=alice, start=0)
    make_runs_bulk(2, agent="billing-bot", start=10)
    make_runs_bulk(4, agent="support-bot", created_by=alice, start=20, step=dt.timedelta(days=1))
    client = client_for(users["viewer"])
    url = reverse("console:queue")
    html = client.get(url, {"tab": "failed", "owner": "alice", "agent": "billing-bot"})
    assert len(_rows(html.content.decode())) == 3
    since = (RUNS_T0 + dt.timedelta(days=22)).strftime("%Y-%m-%d")
    html = client.get(url, {"tab": "failed", "owner": "alice", "since": since}).content.decode()
    assert len(_rows(html)) == 2  # the runs updated on day 22 and 23
    # Every tab link and the form carry the filters.
    assert f'href="?owner=alice&amp;since={since}&amp;tab=succeeded"' in html
    assert 'name="owner" value="alice"' in html and f'name="since" value="{since}"' in html


def test_a_bad_filter_is_named_and_ignored(users):
    make_runs_bulk(2)
    client = client_for(users["viewer"])
    html = client.get(reverse("console:queue"), {
        "tab": "failed", "since": "yesterday", "age": "3y", "reason": "gremlins",
        "cursor": "not-a-cursor"}).content.decode()
    errors = re.findall(r"data-query-error>Ignored: (.*?)</p>", html)
    assert errors == [
        "since “yesterday” is not a date (use 2026-11-30 or 2026-11-30T14:00, UTC).",
        "age “3y” is not one of 5m, 1h, 1d, 7d.",
        "reason “gremlins” is not a reason a run stops for.",
        "the page cursor is not valid (showing the first page).",
    ]
    assert len(_rows(html)) == 2
    assert client.get(reverse("console:queue"), {"tab": "nope"}).status_code == 200


def test_bulk_all_matching_honours_the_same_filters_as_the_list(users):
    alice = make_user("alice")
    make_runs_bulk(3, created_by=alice, status="blocked")
    make_runs_bulk(5, status="blocked", start=10)
    client = client_for(users["operator"])
    html = client.get(reverse("console:bulk"), {"tab": "blocked", "owner": "alice", "all": "1"})
    assert html.status_code == 200
    assert html.context["count"] == 3
    bad = client.get(reverse("console:bulk"), {"tab": "blocked", "since": "soon", "all": "1"})
    assert bad.status_code == 422  # a filter it cannot apply is refused, never dropped


def _queries_for(client, params: dict[str, str]) -> int:
    with CaptureQueriesContext(connection) as sql:
        response = client.get(reverse("console:queue"), params)
    assert response.status_code == 200
    return len(sql.captured_queries)


def test_a_page_costs_the_same_queries_at_thousands_of_runs(users):
    owner = make_user("alice")
    client = client_for(users["viewer"])
    saved_view_create(user=users["viewer"], name="Mine", query="tab=failed&owner=alice")
    make_runs_bulk(30, created_by=owner)
    params = [{"tab": "failed"}, {"tab": "blocked"}, {"tab": "all", "owner": "alice"},
              {"tab": "failed", "view": "groups"}]
    small = [_queries_for(client, p) for p in params]
    for status in ("failed", "succeeded", "blocked", "waiting", "cancelled"):
        make_runs_bulk(800, status=status, created_by=owner, start=1000)
    assert Run.objects.count() > 4000
    large = [_queries_for(client, p) for p in params]
    assert large == small, (small, large)
    assert max(large) <= 16
    html = client.get(reverse("console:queue"), {"tab": "failed"}).content.decode()
    assert len(_rows(html)) == 50
    second = client.get(f"{reverse('console:queue')}?{_next(html)}")
    assert _queries_for(client, parse_qs_flat(_next(html))) == small[0]
    assert len(_rows(second.content.decode())) == 50


def parse_qs_flat(query: str) -> dict[str, str]:
    """Return a query string as a flat dict."""
    return {k: v[0] for k, v in parse_qs(query).items()}


def test_a_user_saves_sees_opens_and_deletes_a_view(users):
    viewer, other = users["viewer"], users["operator"]
    make_runs_bulk(2, agent="billing-bot")
    client = client_for(viewer)
    response = client.post(reverse("console:saved_view_save"), {
        "name": "  Billing   failures ", "query": "?agent=billing-bot&tab=failed&cursor=x_y"})
    assert response.status_code == 303
    assert response["Location"] == "/?tab=failed&agent=billing-bot"
    view = SavedView.objects.get(user=viewer)
    assert (view.name, view.query) == ("Billing failures", "tab=failed&agent=billing-bot")
    html = client.get(response["Location"]).content.decode()
    assert "Saved the view “Billing failures”." in html
    assert ('<a href="?tab=failed&amp;agent=billing-bot" aria-current="true" '
            'data-saved-view="Billing failures">Billing failures</a>') in html
    assert "Billing failures" not in client_for(other).get(reverse("console:queue")).content.decode()
    # Someone else cannot delete it; its owner can.
    client_for(other).post(reverse("console:saved_view_remove", args=[view.pk]))
    assert SavedView.objects.filter(pk=view.pk).exists()
    gone = client.post(reverse("console:saved_view_remove", args=[view.pk]),
                       {"back": "tab=failed"}, follow=True)
    assert not SavedView.objects.filter(pk=view.pk).exists()
    assert "Deleted the view “Billing failures”." in gone.content.decode()


def test_a_bad_saved_query_is_refused_with_a_clear_error(users):
    client = client_for(users["viewer"])
    response = client.post(reverse("console:saved_view_save"),
                           {"name": "Odd", "query": "tab=nope&colour=red&since=soon"}, follow=True)
    html = response.content.decode()
    assert ("The view was not saved: “colour” is not a run-list filter; tab “nope” does not "
            "exist (one of: waiting, blocked, unknown, approvals, running, succeeded, "
            "exceptions, failed, cancelled, all); since “soon” is not a date (use 2026-11-30 "
            "or 2026-11-30T14:00, UTC).") in html
    assert not SavedView.objects.exists()
    with pytest.raises(InvalidListQuery, match="a filter is given twice"):
        saved_view_create(user=users["viewer"], name="Twice", query="tab=failed&tab=all")
    with pytest.raises(InvalidListQuery, match="give the view a name"):
        saved_view_create(user=users["viewer"], name="  ", query="tab=failed")
    saved_view_create(user=users["viewer"], name="Same", query="tab=failed")
    with pytest.raises(SavedViewNameTaken):
        saved_view_create(user=users["viewer"], name="Same", query="tab=all")
    taken = client.post(reverse("console:saved_view_save"), {"name": "Same", "query": "tab=all"},
                        follow=True)
    assert "you already have a view named “Same”" in taken.content.decode()


def test_the_parser_keeps_every_filter_and_the_canonical_string_round_trips():
    query = list_query_parse({"tab": "succeeded", "q": " refund ", "agent": "a", "owner": "bo",
                              "since": "2026-11-30T14:00", "view": "groups", "junk": "1"})
    assert query.errors == []
    text = query.as_query_string()
    again = list_query_parse(parse_qs_flat(text))
    assert again.as_query_string() == text and again.filters.q == "refund"
    assert text == ("tab=succeeded&agent=a&q=refund&owner=bo&since=2026-11-30T14%3A00"
                    "&view=groups")


def test_the_cursor_is_a_keyset_position_not_an_offset():
    runs = make_runs_bulk(3)
    stamp = runs[1].updated_at.isoformat()
    assert list_query_parse({"cursor": f"{stamp}_{runs[1].pk}"}).cursor
    assert list_query_parse({"cursor": f"{stamp}_{uuid.uuid4()}x"}).errors
    assert list_query_parse({"cursor": "2026-11-01"}).errors
