"""A run slot's connection goes back to the pool before a wait and comes back after it.

``db_release`` hands the connection to the psycopg pool (runs.slots.pool_enable);
``db_reacquire`` takes one back without Django's full ``connect()``, and must leave the
wrapper exactly as usable as ``connect()`` would: autocommit on, no transaction state, and
the fence of the next commit unchanged.
"""
from __future__ import annotations


import pytest
from django.db import connection, transaction
from django.db.backends.signals import connection_created

from runs import slots
from runs.models import Run

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _created() -> list[object]:
    sent: list[object] = []
    connection_created.connect(lambda **kw: sent.append(kw["connection"]), weak=False,
                               dispatch_uid="test-slots-pool")
    return sent


def _server_pid() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        return cur.fetchone()[0]


def test_release_hands_the_connection_back_and_reacquire_takes_one(pooled) -> None:
    _server_pid()
    pool = connection.pool
    slots.db_release()
    assert connection.connection is None
    assert pool.get_stats()["pool_available"] >= 1
    sent = _created()
    try:
        slots.db_reacquire()
    finally:
        connection_created.disconnect(dispatch_uid="test-slots-pool")
    assert connection.connection is not None and connection.get_autocommit()
    assert sent == []  # the fast path: no connect(), no signal
    assert _server_pid() > 0
    with transaction.atomic():  # transactions work as after a full connect()
        Run.objects.exists()
    assert connection.connection.autocommit


def test_reacquire_without_a_release_connects_through_django(pooled) -> None:
    connection.close()
    sent = _created()
    try:
        slots.db_reacquire()
    finally:
        connection_created.disconnect(dispatch_uid="test-slots-pool")
    assert connection.connection is not None
    assert len(sent) == 1


def test_release_inside_a_transaction_keeps_the_connection(pooled) -> None:
    with transaction.atomic():
        Run.objects.exists()
        slots.db_release()
        assert connection.connection is not None
        slots.db_reacquire()
        assert connection.in_atomic_block


def test_a_connection_handed_back_in_a_transaction_comes_back_in_autocommit(pooled) -> None:
    _server_pid()
    slots.db_release()
    pool = connection.pool
    raw = pool.getconn()  # another thread leaves one in a transaction, autocommit off
    raw.autocommit = False
    raw.execute("SELECT 1")
    pool.putconn(raw)
    slots.db_reacquire()
    assert connection.connection.autocommit and connection.get_autocommit()
    with connection.cursor() as cur:
        cur.execute("SELECT now() = statement_timestamp()")  # not inside an old transaction
        assert cur.fetchone()[0] is True
