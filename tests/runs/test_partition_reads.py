"""Per-run reads of the event log name the run's month, so PostgreSQL reads one partition.

The console's run pages (events, history, trace) and the engine's replay are driven through
their real paths; every statement they send to the event table is then EXPLAINed on the
partitioned table (several monthly partitions and the default one) and must scan exactly
the run's month. SQLite has one plain table: the pages still show the run's events.
"""
from __future__ import annotations

import datetime as dt
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.engine.runtime.events import NewEvent, event_append
from runs.engine.runtime.snapshots import load_state
from runs.models import Event, Run
from runs.models.event import run_events, run_month
from runs.partitions import partition_make, partitions_list
from approvals.roles import VIEWER
from tests.console_factories import client_for, make_event_history, make_user
from tests.factories import make_run

pytestmark = pytest.mark.django_db
_SCAN = re.compile(r" on (runs_event_p\d{6}|runs_event_default)\b(.*)$")
PAGES = ("", "events/", "history/", "trace/", "history/?order=newest&q=refund")


def _scanned(sql: str, params: list | None = None, *, analyze: bool = False) -> set[str]:
    """Return the partitions the plan of ``sql`` reads (executed ones only, with ANALYZE)."""
    with connection.cursor() as cursor:
        cursor.execute(("EXPLAIN ANALYZE " if analyze else "EXPLAIN ") + sql, params)
        lines = [row[0] for row in cursor.fetchall()]
    return {m.group(1) for line in lines if (m := _SCAN.search(line))
            and "never executed" not in m.group(2)}


def _event_statements(queries: list[dict]) -> list[str]:
    return [q["sql"] for q in queries if "runs_event" in q["sql"]
            and q["sql"].lstrip().upper().startswith("SELECT")]


@pytest.fixture
def months():
    """At least three monthly partitions besides the default one, on PostgreSQL."""
    if connection.vendor != "postgresql":
        pytest.skip("partitions are PostgreSQL's")
    for month in (dt.date(2024, 3, 1), dt.date(2024, 4, 1)):
        partition_make(month)
    assert len(partitions_list()) >= 3
    return partitions_list()


def _run_with_history() -> Run:
    run = make_run(goal="refund order 42")
    make_event_history(run, 12)
    Run.objects.filter(pk=run.pk).update(last_seq=13)
    run.refresh_from_db()
    return run


def test_the_run_pages_show_the_runs_events_on_every_database():
    run = _run_with_history()
    client = client_for(make_user("reader", VIEWER))
    for page in PAGES[:3]:
        response = client.get(f"/runs/{run.pk}/{page}")
        assert response.status_code == 200 and b"run.created" in response.content, page
    assert list(run_events(run).values_list("seq", flat=True).order_by("seq")) == list(
        range(1, 14))
    assert run_events(run.pk).count() == 13  # by id: the same events


def test_the_run_pages_read_only_the_runs_partition(months):
    run = _run_with_history()
    own = f"runs_event_p{run_month(run.created_at):%Y%m}"
    client = client_for(make_user("reader", VIEWER))
    for page in PAGES:
        with CaptureQueriesContext(connection) as seen:
            assert client.get(f"/runs/{run.pk}/{page}").status_code == 200
        statements = _event_statements(seen.captured_queries)
        assert statements, page
        for sql in statements:
            assert _scanned(sql) == {own}, (page, sql)


def test_replay_reads_only_the_runs_partition_given_the_run_or_its_id(months):
    run = make_run()
    for i in range(3):
        event_append(run=run, events=[NewEvent("run.note", {"text": f"n{i}"})])
    own = f"runs_event_p{run_month(run.created_at):%Y%m}"
    for given in (run, run.pk):
        with CaptureQueriesContext(connection) as seen:
            state = load_state(given)
        assert state["seq"] == 4
        (sql,) = _event_statements(seen.captured_queries)
        # Given the Run the planner keeps one partition; given an id the month is read in
        # the same statement and the other partitions are never executed.
        assert _scanned(sql, analyze=given == run.pk) == {own}, sql
    assert _scanned(*run_events(run.pk).query.sql_with_params(), analyze=True) == {own}


def test_a_run_moved_to_another_month_is_read_from_that_month(months):
    run = make_run()
    event_append(run=run, events=[NewEvent("run.note", {"text": "x"})])  # month kept on run
    old = dt.datetime(2024, 3, 9, 12, tzinfo=dt.timezone.utc)
    Run.objects.filter(pk=run.pk).update(created_at=old)
    Event.objects.filter(run_id=run.pk).update(run_month=run_month(old))
    run.refresh_from_db()
    assert run_events(run).count() == 2
    assert _scanned(*run_events(run).query.sql_with_params()) == {"runs_event_p202403"}
