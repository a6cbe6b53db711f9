"""The recoverer: a dead owner's runs at once, an expired lease at its expiry, a paused holder's lock."""
import datetime as dt
import time

import psycopg
import pytest
from django.db import connection
from django.test import override_settings

from agentops import clock
from runs.engine.runtime.recovery import runs_recover_expired
from runs.models import Event, Run
from runs.pooler import pooled
from runs.recoverer import Watch, _after_outage, recover_round
from tests.factories import make_run
from tests.pg_sessions import pg_session

pytestmark = pytest.mark.django_db(transaction=True)


def _running(owner: str, *, expires_in_s: float) -> Run:
    run = make_run()
    Run.objects.filter(pk=run.pk).update(
        status="running", lease_owner=owner,
        lease_expires_at=clock.now() + dt.timedelta(seconds=expires_in_s))
    return run


def _cause(run: Run) -> str:
    return Event.objects.get(run=run, type="run.recovered").data["cause"]


def test_an_expired_lease_is_recovered_at_its_expiry_not_a_sweep_later():
    run = _running("paused-host:4100", expires_in_s=0.4)
    watch = Watch(owners_due=float("inf"))  # only the expiry is watched here
    with override_settings(AGENTOPS_SWEEP_INTERVAL_S=30):
        wait = recover_round(watch)
        assert wait <= 0.41  # it sleeps until the expiry, not the 30 s interval
        deadline = time.monotonic() + 5
        while Run.objects.get(pk=run.pk).status == "running" and time.monotonic() < deadline:
            time.sleep(max(wait, 0.01))
            wait = recover_round(watch)
    run.refresh_from_db()
    assert (run.status, run.urgent, run.recoveries) == ("queued", True, 1)
    assert _cause(run) == "lease_expired"


@pytest.mark.postgres
def test_a_dead_owner_is_noticed_by_its_vanished_session_before_the_next_sweep():
    if pooled():  # no session there is an owner's own (runs.pooler): leases expire instead
        pytest.skip("owners are not judged by session name behind a transaction pooler")
    session = pg_session("gone-host:4100001")
    session.commit()  # idle, not inside a transaction
    run = _running("gone-host:4100001", expires_in_s=60)
    with override_settings(AGENTOPS_SWEEP_INTERVAL_S=30):
        watch = Watch()
        assert recover_round(watch) <= 0.2  # the session names are read again soon
        assert Run.objects.get(pk=run.pk).status == "running"  # its owner is alive
        session.close()  # the worker dies: its sessions close with it
        deadline = time.monotonic() + 5
        while Run.objects.get(pk=run.pk).status == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
            recover_round(watch)  # the full check is 30 s away: the vanished name did it
    run.refresh_from_db()
    assert (run.status, run.recoveries) == ("queued", 1)
    assert _cause(run) == "owner_gone"


@pytest.mark.postgres
def test_a_paused_holder_locking_its_expired_run_is_ended_and_the_run_recovered():
    """A worker paused inside a transaction keeps its row lock: its session is ended."""
    if pooled():  # PgBouncer's idle_transaction_timeout ends it there
        pytest.skip("sessions are not ended by owner name behind a transaction pooler")
    owner = "paused-host:4100002"
    run = _running(owner, expires_in_s=-1)
    holder = pg_session(owner)
    holder.execute("SELECT 1 FROM runs_run WHERE id = %s FOR UPDATE", [run.pk])
    try:
        with override_settings(AGENTOPS_LEASE_TTL_S=0.3):
            time.sleep(0.3)  # idle inside its transaction for over a third of the TTL
            assert runs_recover_expired() == [run.pk]
        assert _dead(holder)  # its transaction rolled back with it: it can commit nothing
    finally:
        holder.close()
    run.refresh_from_db()
    assert (run.status, run.recoveries) == ("queued", 1)


@pytest.mark.postgres
def test_a_live_holder_inside_a_short_transaction_is_left_alone():
    owner = "busy-host:4100003"
    run = _running(owner, expires_in_s=-1)
    holder = pg_session(owner)
    holder.execute("SELECT 1 FROM runs_run WHERE id = %s FOR UPDATE", [run.pk])
    try:
        with override_settings(AGENTOPS_LEASE_TTL_S=60):  # idle far less than TTL / 3
            assert runs_recover_expired() == []
            # Tried again a check later, not in a busy loop on the expiry already past.
            assert recover_round(Watch(owners_due=float("inf"))) >= 0.19
        assert not _dead(holder)
    finally:
        holder.close()


def _dead(conn: psycopg.Connection) -> bool:
    """Return True when the server ended ``conn``'s session."""
    try:
        conn.execute("SELECT 1")
    except psycopg.OperationalError:
        return True
    return False


@pytest.mark.postgres
def test_after_an_outage_only_owners_seen_again_are_judged_by_their_vanished_name():
    """After a failover a live worker may hold no session yet (its runs all wait on their
    model) while its keeper renews their leases: its runs are not taken from it. One seen on
    the new server and then gone is dead, as before the outage."""
    if pooled():
        pytest.skip("owners are not judged by session name behind a transaction pooler")
    quiet = _running("quiet-host:4100011", expires_in_s=60)  # alive, no session yet
    comes_back = _running("back-host:4100012", expires_in_s=60)
    watch = Watch()
    _after_outage(watch, time.monotonic() - 10)  # the grace after the outage is over
    session = pg_session("back-host:4100012")
    session.commit()
    recover_round(watch)
    recover_round(watch)
    assert Run.objects.get(pk=quiet.pk).status == "running"  # never seen: left to its lease
    assert Run.objects.get(pk=comes_back.pk).status == "running"  # seen, alive
    session.close()  # the worker seen after the outage dies
    deadline = time.monotonic() + 5
    while Run.objects.get(pk=comes_back.pk).status == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
        recover_round(watch)
    assert (Run.objects.get(pk=comes_back.pk).status, _cause(comes_back)) == ("queued",
                                                                               "owner_gone")
    assert Run.objects.get(pk=quiet.pk).status == "running"


def test_a_look_at_leases_none_expired_is_one_read_not_a_recovery_query_too():
    from django.test.utils import CaptureQueriesContext

    _running("live-host:4100", expires_in_s=60)
    with CaptureQueriesContext(connection) as queries:
        wait = recover_round(Watch(owners_due=float("inf")))
    reads = [q["sql"] for q in queries if "pg_stat_activity" not in q["sql"]]
    assert len(reads) == 1, reads  # the next expiry, and whether one passed, in one read
    assert 0 < wait <= 1.0
