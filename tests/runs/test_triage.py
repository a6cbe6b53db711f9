"""Decide-and-next (runs/triage.py): the stuck run after this one, oldest first, wrapping;
the confirm step's "then open the next stuck run" sends the operator there after acting."""
from __future__ import annotations

import datetime as dt
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals.models import Intervention
from runs.models import Run
from runs.triage import run_next_stuck
from tests.console_factories import client_for, make_attention_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def stuck():
    """Three stuck runs (blocked, unknown, blocked) oldest first, and runs that are not stuck."""
    runs = [make_attention_run(goal="one", age=dt.timedelta(hours=3)),
            make_attention_run("unknown", goal="two", age=dt.timedelta(hours=2),
                               recommended="confirm_not_executed"),
            make_attention_run(goal="three", age=dt.timedelta(hours=1))]
    make_attention_run("waiting", goal="an approval is not stuck", age=dt.timedelta(hours=4))
    done = make_attention_run(goal="finished", age=dt.timedelta(hours=5))
    Run.objects.filter(pk=done.pk).update(status="failed")
    return runs


def _after(run):
    run.refresh_from_db()
    return run_next_stuck(after_id=run.pk, after_updated_at=run.updated_at, teams=None)


def test_next_stuck_is_the_next_oldest_then_wraps(stuck):
    one, two, three = stuck
    assert _after(one) == two
    assert _after(two) == three
    assert _after(three) == one


def test_a_settled_run_keeps_its_place_in_the_walk(stuck):
    one, two, _ = stuck
    seen = one.updated_at
    Run.objects.filter(pk=one.pk).update(status="queued")  # settled: moved to the end
    assert run_next_stuck(after_id=one.pk, after_updated_at=seen, teams=None) == two


def test_no_next_when_alone():
    run = make_attention_run()
    assert _after(run) is None


def _retry(client, run, headers=None, **extra):
    return client.post(reverse("console:run_action", args=[run.pk, "retry"]),
                       {"reason": "provider is back", "seen_seq": run.last_seq, **extra},
                       headers=headers)


def test_then_next_goes_to_the_next_stuck_run(users, stuck):
    one, two, _ = stuck
    response = _retry(client_for(users["operator"]), one, then="next")
    assert response.status_code == 302 and response.url == reverse("console:run", args=[two.pk])
    assert Intervention.objects.filter(run=one, action="run.retry").count() == 1


def test_then_next_over_htmx_redirects_the_page(users, stuck):
    one, two, _ = stuck
    response = _retry(client_for(users["operator"]), one, then="next", headers={"HX-Request": "true"})
    assert response["HX-Redirect"] == reverse("console:run", args=[two.pk])


def test_without_then_next_the_operator_stays(users, stuck):
    one = stuck[0]
    response = _retry(client_for(users["operator"]), one)
    assert response.url == reverse("console:run", args=[one.pk])


def test_after_the_last_stuck_run_the_queue_says_none_are_left(users):
    run = make_attention_run()
    client = client_for(users["operator"])
    response = _retry(client, run, then="next")
    assert response.url == reverse("console:queue")
    assert "No stuck runs are left." in client.get(response.url).content.decode()


def test_a_refused_action_moves_nowhere(users, stuck):
    one = stuck[0]
    response = _retry(client_for(users["operator"]), one, then="next", reason="")
    assert response.status_code == 422 and Run.objects.get(pk=one.pk).status == "blocked"


def test_the_confirm_step_offers_then_next_only_on_stuck_runs(users, stuck):
    client = client_for(users["operator"])
    url = reverse("console:run_action", args=[stuck[0].pk, "retry"])
    box = re.compile(r'<input type="checkbox" name="then" value="next"\s*(checked)?')
    assert box.search(client.get(url + "?then=next").content.decode()).group(1) == "checked"
    assert box.search(client.get(url).content.decode()).group(1) is None
    waiting = make_attention_run("waiting")
    html = client.get(reverse("console:run_action", args=[waiting.pk, "terminate"])).content
    assert b'name="then"' not in html


def test_the_run_page_links_the_next_stuck_run(users, stuck):
    html = client_for(users["viewer"]).get(
        reverse("console:run", args=[stuck[0].pk])).content.decode()
    assert f'href="{reverse("console:run", args=[stuck[1].pk])}" rel="next" data-next-stuck' in html


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plans")
def test_the_walk_reads_a_few_pages_however_long_the_history(stuck):
    # Finished runs older than every stuck one: without an index of stuck runs in the queue's
    # order, finding the oldest stuck run filters the whole history (1.2 s at 500k runs).
    # A tenth of all runs stuck, as the planner will then guess a walk by time finds one soon.
    Run.objects.bulk_create(Run(agent_name="old", agent_version="1", goal="done long ago",
                                status="succeeded") for _ in range(3000))
    Run.objects.bulk_create(Run(agent_name="new", agent_version="1", goal="stuck lately",
                                status="blocked") for _ in range(300))
    Run.objects.filter(agent_name="old").update(
        updated_at=stuck[0].updated_at - dt.timedelta(days=30))
    Run.objects.filter(agent_name="new").update(
        updated_at=stuck[2].updated_at - dt.timedelta(minutes=1))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_run")
    with CaptureQueriesContext(connection) as seen:
        assert _after(stuck[2]) == stuck[0]  # the wrap: both of the walk's queries run
    walk = [q["sql"] for q in seen.captured_queries if "LIMIT 1" in q["sql"]]
    assert len(walk) == 2
    for sql in walk:
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql)
            plan = cursor.fetchone()[0][0]["Plan"]
        pages = plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0)
        assert pages <= 40, (pages, sql)
