"""A run's full history page (issue 21): every event, paged by seq, filtered by type and by
text in the payload, each one's raw JSON in a <details> that opens without JavaScript."""
from __future__ import annotations

import html as htmllib
import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.models import Event
from tests.console_factories import client_for, make_event_history
from tests.factories import make_run

pytestmark = pytest.mark.django_db


def _seqs(html: str) -> list[int]:
    return [int(s) for s in re.findall(r'<tr data-row data-id="(\d+)" id="ev-\d+">', html)]


def _next(html: str) -> str:
    return re.search(r'href="\?([^"]+)" rel="next"', html).group(1).replace("&amp;", "&")


def test_every_event_pages_by_seq_oldest_first_or_newest_first(users):
    run = make_run(goal="Refund order A-7")
    make_event_history(run, 129)  # 130 events with run.created
    client = client_for(users["viewer"])
    url = reverse("console:run_history", args=[run.pk])
    first = client.get(url).content.decode()
    assert _seqs(first) == list(range(1, 51))
    second = client.get(f"{url}?{_next(first)}").content.decode()
    assert _seqs(second) == list(range(51, 101))
    third = client.get(f"{url}?{_next(second)}").content.decode()
    assert _seqs(third) == list(range(101, 131)) and 'rel="next"' not in third
    newest = client.get(url, {"order": "newest"}).content.decode()
    assert _seqs(newest) == list(range(130, 80, -1))
    assert _seqs(client.get(f"{url}?{_next(newest)}").content.decode()) == list(range(80, 30, -1))


def test_type_filter_and_text_search_in_the_payload(users):
    run = make_run(goal="Refund order A-7")
    make_event_history(run, 40)
    client = client_for(users["viewer"])
    url = reverse("console:run_history", args=[run.pk])
    results = _seqs(client.get(url, {"type": "tool.result"}).content.decode())
    assert results and all(Event.objects.get(run=run, seq=s).type == "tool.result"
                           for s in results)
    assert len(results) == 20
    found = client.get(url, {"q": "SEND_EMAIL", "type": "tool.started"}).content.decode()
    assert _seqs(found) == [s for s in range(2, 42) if (s - 2) % 4 == 2]
    by_call = client.get(url, {"q": "tc_3"}).content.decode()
    assert _seqs(by_call) == [8, 9]
    # Each tool call id links to every event of that call, the other filters kept.
    assert '<a href="?type=tool.result&amp;q=tc_3" title="Every event of this tool call">' in (
        client.get(url, {"type": "tool.result"}).content.decode())
    bad = client.get(url, {"type": "tool.exploded"}).content.decode()
    assert "Ignored: “tool.exploded” is not an event type; showing every type." in bad
    assert len(_seqs(bad)) == 41
    assert "No events match." in client.get(url, {"q": "nothing like this"}).content.decode()


def test_each_event_opens_to_its_raw_json_as_stored_escaped(users):
    run = make_run(goal="Refund order A-7")
    make_event_history(run, 12)
    client = client_for(users["viewer"])
    html = client.get(reverse("console:run_history", args=[run.pk])).content.decode()
    row = re.search(r'<tr data-row data-id="9" id="ev-9">(.*?)</tr>', html, re.S).group(1)
    raw = re.search(r'<details data-raw><summary class="small">.*?</summary>'
                    r'<pre class="json">(.*?)</pre></details>', row, re.S).group(1)
    stored = json.loads(htmllib.unescape(raw))
    event = Event.objects.get(run=run, seq=9)
    assert stored == {"seq": 9, "type": "tool.result", "at": event.at.isoformat(),
                      "actor": "engine", "tool_call_id": "tc_3", "attempt": None, "key": None,
                      "schema_version": 1, "data": event.data}
    assert "customer &lt;b&gt;vip&lt;/b&gt;" in row and "<b>vip</b>" not in html
    # A sensitive argument is shown as the marker it was stored as, never the value.
    assert "4729-PIN" not in html and "[redacted hmac:" in html


def test_the_run_page_links_to_the_history_and_it_costs_few_queries(users):
    run = make_run(goal="Refund order A-7")
    make_event_history(run, 3000)
    client = client_for(users["viewer"])
    page = client.get(reverse("console:run", args=[run.pk])).content.decode()
    url = reverse("console:run_history", args=[run.pk])
    assert f'href="{url}" data-history-link>Full history, searchable →</a>' in page
    with CaptureQueriesContext(connection) as sql:
        response = client.get(url, {"q": "refund", "after": "2500"})
    assert response.status_code == 200
    assert len(sql.captured_queries) <= 6
    assert _seqs(response.content.decode())[0] > 2500
    assert client.get(reverse("console:run_history", args=[
        "00000000-0000-0000-0000-000000000000"])).status_code == 404
