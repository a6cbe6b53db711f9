"""Partitioned history: events land in their run's month, partitions are made ahead, and
retention drops whole partitions (PostgreSQL); SQLite keeps one plain table."""
from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction

from agentops import clock
from runs.engine.runtime.events import NewEvent, event_append
from runs.models import Event, Run
from runs.models.event import run_month
from runs.partitions import (month_after, partition_make, partitioned, partitions_drop,
                             partitions_ensure, partitions_list)
from runs.statuses import RunStatus
from tests.clock_helpers import clock_reads
from tests.factories import make_run

pytestmark = pytest.mark.django_db
OLD_MONTH = dt.date(2024, 3, 1)


def _pg() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("partitions are PostgreSQL's")


def _where(run: Run) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT tableoid::regclass::text FROM runs_event "
                       "WHERE run_id = %s", [run.pk])
        return {row[0] for row in cursor.fetchall()}


def run_in(month: dt.date, *, status: str = RunStatus.SUCCEEDED, events: int = 3) -> Run:
    """A run created in ``month`` (its events in that month's partition), ended then."""
    run = Run.objects.create(agent_name="a", agent_version="1", goal="old")
    created = dt.datetime.combine(month, dt.time(12), tzinfo=dt.timezone.utc)
    Run.objects.filter(pk=run.pk).update(created_at=created)
    run.refresh_from_db()
    event_append(run=run, events=[NewEvent("run.created", {"agent": "a", "version": "1",
                                                           "goal": "old", "input": {},
                                                           "plan": [{"key": "m", "title": "m"}]})])
    for i in range(events - 1):
        event_append(run=run, events=[NewEvent("run.note", {"text": f"n{i}"})])
    finished = created + dt.timedelta(days=1) if status == RunStatus.SUCCEEDED else None
    Run.objects.filter(pk=run.pk).update(status=status, finished_at=finished)
    run.refresh_from_db()
    return run


def test_every_event_carries_its_runs_month_on_every_database():
    run = make_run()
    event_append(run=run, events=[NewEvent("run.note", {"text": "x"})])
    months = set(Event.objects.filter(run=run).values_list("run_month", flat=True))
    assert months == {run_month(run.created_at)}
    # A writer that does not set it (a fork's copy of the log) gets it from the run.
    Event.objects.create(run=run, seq=3, type="run.note", data={}, at=clock.now())
    assert Event.objects.get(run=run, seq=3).run_month == run_month(run.created_at)


def test_sqlite_has_no_partitions_and_the_command_says_so():
    if connection.vendor == "postgresql":
        pytest.skip("SQLite's answer")
    assert not partitioned() and partitions_list() == [] and partitions_ensure() == []
    with pytest.raises(CommandError, match="not partitioned"):
        call_command("agentops_partitions", "list")


def test_events_land_in_their_runs_month_partition_and_seq_stays_unique():
    _pg()
    run = make_run()
    event_append(run=run, events=[NewEvent("run.note", {"text": "x"})])
    assert _where(run) == {f"runs_event_p{run_month(run.created_at):%Y%m}"}
    with pytest.raises(IntegrityError), transaction.atomic():
        Event.objects.create(run=run, seq=2, type="run.note", data={}, at=clock.now())


def test_a_run_in_a_month_without_partition_lands_in_default_and_moves_when_made():
    _pg()
    run = run_in(OLD_MONTH)
    assert _where(run) == {"runs_event_default"}
    with clock_reads(lambda: dt.datetime(2024, 3, 5, tzinfo=dt.timezone.utc)):
        made = partitions_ensure(ahead=1)
    assert made == ["runs_event_p202403", "runs_event_p202404"]
    assert _where(run) == {"runs_event_p202403"}
    assert Event.objects.filter(run=run).count() == 3
    # The sweeper's part makes nothing when the months are there.
    with clock_reads(lambda: dt.datetime(2024, 3, 5, tzinfo=dt.timezone.utc)):
        assert partitions_ensure(ahead=1) == []


def test_drop_takes_whole_old_partitions_and_refuses_one_with_a_live_run():
    _pg()
    for month in (OLD_MONTH, month_after(OLD_MONTH)):
        partition_make(month)
    gone = run_in(OLD_MONTH)
    live = run_in(month_after(OLD_MONTH), status=RunStatus.RUNNING)
    dry = partitions_drop(older_than_days=30, archive=False, dry_run=True)
    assert [(d["partition"], d["dropped"]) for d in dry] == [
        ("runs_event_p202403", False), ("runs_event_p202404", False)]
    done = partitions_drop(older_than_days=30, archive=False, dry_run=False)
    assert done[0] == {"partition": "runs_event_p202403", "dropped": True, "reason": "",
                       "archived": 0}
    assert not done[1]["dropped"] and "1 runs not finished" in done[1]["reason"]
    assert not Event.objects.filter(run=gone).exists()
    assert Event.objects.filter(run=live).count() == 3
    names = [p.name for p in partitions_list()]
    assert "runs_event_p202403" not in names and "runs_event_p202404" in names


def test_the_drop_command_reports_what_it_kept():
    _pg()
    partition_make(OLD_MONTH)
    run_in(OLD_MONTH, status=RunStatus.RUNNING)
    out = StringIO()
    call_command("agentops_partitions", "drop", "--older-than-days", "30", stdout=out)
    assert "kept: partition runs_event_p202403: 1 runs not finished" in out.getvalue()
    with pytest.raises(CommandError, match="at least 1"):
        call_command("agentops_partitions", "drop", "--older-than-days", "0")
