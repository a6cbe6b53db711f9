"""Upgrading: events written before partitioning keep their ids, seqs and data, gain their run's
month and (on PostgreSQL) move into that month's partition; the way back keeps them too."""
from __future__ import annotations

import datetime as dt

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)
BEFORE = [("runs", "0017_team_owns_budgets_and_saved_views")]
AFTER = [("runs", "0018_event_partitions")]
MADE = dt.datetime(2025, 7, 14, 9, tzinfo=dt.timezone.utc)


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def _leaves():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _where() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT tableoid::regclass::text FROM runs_event")
        return {row[0] for row in cursor.fetchall()}


def test_events_made_before_partitioning_keep_everything_and_gain_their_month():
    old = _migrate(BEFORE)
    run = old.get_model("runs", "Run").objects.create(agent_name="a", agent_version="1",
                                                       goal="before")
    old.get_model("runs", "Run").objects.filter(pk=run.pk).update(created_at=MADE)
    Event = old.get_model("runs", "Event")
    for seq in (1, 2):
        Event.objects.create(run_id=run.pk, seq=seq, type="run.note", data={"n": seq},
                             key=f"k{seq}", at=MADE)
    ids = list(Event.objects.order_by("seq").values_list("id", flat=True))
    try:
        new = _migrate(AFTER)
        Event = new.get_model("runs", "Event")
        rows = list(Event.objects.order_by("seq").values_list("id", "seq", "data", "run_month"))
        assert rows == [(ids[0], 1, {"n": 1}, dt.date(2025, 7, 1)),
                        (ids[1], 2, {"n": 2}, dt.date(2025, 7, 1))]
        if connection.vendor == "postgresql":
            assert _where() == {"runs_event_p202507"}
        later = Event.objects.create(run_id=run.pk, seq=3, type="run.note", data={},
                                     at=MADE, run_month=dt.date(2025, 7, 1))
        assert later.id > ids[1]  # the id sequence carried on
        with pytest.raises(IntegrityError), transaction.atomic():
            Event.objects.create(run_id=run.pk, seq=3, type="run.note", data={}, at=MADE,
                                 run_month=dt.date(2025, 7, 1))
        back = _migrate(BEFORE)
        assert list(back.get_model("runs", "Event").objects.order_by("seq")
                    .values_list("seq", flat=True)) == [1, 2, 3]
    finally:
        _migrate(_leaves())
