"""bench/_common: the per-step counters engine_throughput and peers print."""
import pytest
from django.db import connection

from agentops.redaction import EMPTY
from bench._common import RoundTrips, pg_counters, pg_delta
from runs.engine.runtime.events import NewEvent, event_append

pytestmark = [pytest.mark.postgres]


@pytest.mark.django_db
def test_round_trips_count_each_exchange_with_the_server():
    connection.ensure_connection()
    trips = RoundTrips().start()
    try:
        with connection.cursor() as cur:
            for _ in range(3):
                cur.execute("SELECT 1")
                cur.fetchone()
        n, waited = trips.take()
    finally:
        trips.stop()
    assert n == 3 and waited > 0
    assert trips.take() == (0, 0.0)


@pytest.mark.django_db(transaction=True)
def test_a_lease_holders_unit_is_one_round_trip(run):
    """In autocommit, as in a worker, a unit (events + projection, version-checked) is one
    statement: no BEGIN, no savepoint, no COMMIT of its own."""
    connection.ensure_connection()
    before = pg_counters()
    trips = RoundTrips().start()
    try:
        event_append(run=run, events=[NewEvent("run.note", {"text": "x"})],
                     expected_version=run.version, touch=False, secrets=EMPTY)
        n, _ = trips.take()
    finally:
        trips.stop()
    assert n == 1
    delta = pg_delta(before)
    assert delta["commits"] >= 1 and delta["wal_bytes"] > 0 and delta["server_ms"] >= 0
