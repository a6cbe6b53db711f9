"""A fence renews the lease in full but stamps ``updated_at`` (indexed) only at the lease's pace.

A read tool's step opens its attempt with a fenced unit: if each fence wrote ``updated_at``,
every other Run update of a busy run would write all of the run table's indexes.
"""
from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection, transaction

from agentops import clock
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.loop import session_open
from runs.engine.runtime.transition import run_claim
from runs.models import Run
from runs.services import run_start
from tests.clock_helpers import clock_reads

_UPDATES = ("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables "
            "WHERE relname = 'runs_run'")


def _session(engine, name):
    engine.make_agent(name, {"s": [engine.say("ok")]}, plan=["s"])
    run = run_start(agent=name, goal="g")
    return session_open(run_claim(run_id=run.pk, owner="w", ttl_s=3.0), "w")


@pytest.mark.django_db
def test_a_fence_renews_the_lease_in_full_and_stamps_updated_at_only_past_a_third_of_the_ttl(
        engine, settings):
    settings.AGENTOPS_LEASE_TTL_S = 3.0
    start = clock.now()
    t = {"now": start}
    with clock_reads(lambda: t["now"]):
        session = _session(engine, "fenced")
        stamped = Run.objects.get(pk=session.run.pk).updated_at
        t["now"] = start + dt.timedelta(seconds=0.5)  # under a third of the TTL
        session.commit([NewEvent("run.note", {"text": "one"})], fence=True)
        fresh = Run.objects.get(pk=session.run.pk)
        assert fresh.lease_expires_at == t["now"] + dt.timedelta(seconds=3.0)  # in full
        assert fresh.updated_at == stamped
        t["now"] = start + dt.timedelta(seconds=1.1)  # past a third: stamped again
        session.commit([NewEvent("run.note", {"text": "two"})], fence=True)
        fresh = Run.objects.get(pk=session.run.pk)
        assert fresh.lease_expires_at == t["now"] + dt.timedelta(seconds=3.0)
        assert fresh.updated_at == t["now"]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_fenced_units_update_the_run_row_in_place(engine, settings):
    settings.AGENTOPS_LEASE_TTL_S = 3.0
    session = _session(engine, "fenced-hot")
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(_UPDATES)
        before = cur.fetchone() or (0, 0)
        for i in range(3):
            session.commit([NewEvent("run.note", {"text": str(i)})], fence=True)
        cur.execute(_UPDATES)
        updates, hot = (a - b for a, b in zip(cur.fetchone(), before, strict=True))
    assert (updates, hot) == (3, 3)
