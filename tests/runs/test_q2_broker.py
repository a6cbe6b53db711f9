"""q2's broker: on PostgreSQL a pusher waits for a NOTIFY instead of polling the queue table."""
from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import DatabaseError, connection, connections
from django.test import override_settings
from django.utils import timezone
from django_q.brokers import get_broker
from django_q.models import OrmQ

from runs.cli.q2_host import ReconnectingBroker
from runs.engine.runtime.q2_broker import CHANNEL, FALLBACK_S
from runs.pooler import pooled
from tests.pg_sessions import pg_session

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
direct = pytest.mark.skipif(pooled(), reason="a transaction pooler keeps no session to LISTEN on")


def _pusher(broker, stop: threading.Event, got: list, statements: list) -> None:
    """Dequeue like q2's pusher until ``stop``; count the statements its session sends."""
    def count(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    try:
        with connections["default"].execute_wrapper(count):
            while not stop.is_set():
                tasks = broker.dequeue()
                if tasks:
                    got.extend((time.monotonic(), pk, payload) for pk, payload in tasks)
    finally:
        connections["default"].close()


def _start(broker):
    stop, got, statements = threading.Event(), [], []
    thread = threading.Thread(target=_pusher, args=(broker, stop, got, statements), daemon=True)
    thread.start()
    return stop, got, statements, thread


@direct
def test_an_idle_pusher_asks_the_table_about_once_a_second_not_twenty_times():
    broker = get_broker()
    stop, got, statements, thread = _start(broker)
    time.sleep(0.5)  # listening by now
    before = len(statements)
    time.sleep(3.0)
    idle = len(statements) - before
    stop.set()
    thread.join(5)
    # q2's ORM broker: a SELECT every 0.05 s (and a health check before each): ~120 here.
    assert idle <= 3 / FALLBACK_S * 2 + 2, statements[before:]
    assert not got


@direct
def test_a_queued_task_wakes_the_waiting_pusher_at_once():
    broker = get_broker()
    stop, got, statements, thread = _start(broker)
    try:
        time.sleep(0.5)  # waiting on the notification now
        queued_at = time.monotonic()
        task_id = broker.enqueue("signed-task")
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join(5)
    assert [(pk, payload) for _, pk, payload in got] == [(task_id, "signed-task")]
    assert got[0][0] - queued_at < 0.5 * FALLBACK_S
    # Taken: locked for q2's retry, so no other pusher takes it meanwhile.
    assert OrmQ.objects.get(pk=task_id).lock > timezone.now() + timedelta(seconds=60)


@direct
def test_a_task_due_without_a_notification_is_taken_by_the_fallback_look():
    broker = get_broker()
    stop, got, _, thread = _start(broker)
    try:
        time.sleep(0.5)
        # A task whose lock ran out (its pusher's host died): due, and nobody notified.
        row = OrmQ.objects.create(key=broker.list_key, payload="redelivered",
                                  lock=timezone.now() - timedelta(seconds=1))
        deadline = time.monotonic() + FALLBACK_S + 3
        while not got and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        stop.set()
        thread.join(5)
    assert [pk for _, pk, _ in got] == [row.pk]


def test_tasks_are_taken_oldest_first_and_acknowledged_by_delete():
    broker = get_broker()
    first, second = broker.enqueue("one"), broker.enqueue("two")
    assert broker.dequeue() == [(first, "one")]
    assert broker.dequeue() == [(second, "two")]
    broker.acknowledge(first)
    assert list(OrmQ.objects.values_list("pk", flat=True)) == [second]


@direct
def test_a_notification_is_sent_only_when_the_enqueuing_transaction_commits():
    from django.db import transaction

    broker = get_broker()
    other = _listener()
    try:
        with transaction.atomic():
            broker.enqueue("inside")
            assert not list(other.notifies(timeout=0.3))
        assert [n.channel for n in other.notifies(timeout=2, stop_after=1)] == [CHANNEL]
    finally:
        other.close()


@direct
def test_a_pusher_whose_session_was_ended_while_waiting_listens_again():
    broker = ReconnectingBroker(get_broker())
    stop, got, _, thread = _start(broker)
    try:
        time.sleep(0.5)
        with connection.cursor() as cur:  # what a failover or a killed backend does to it
            cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                        "(query LIKE 'LISTEN%%' OR query LIKE 'UPDATE django_q_ormq%%') "
                        "AND pid <> pg_backend_pid() "
                        "AND datname = current_database()")
        time.sleep(1.5)  # the wait failed; the wrapper asks again on a new session
        queued_at = time.monotonic()
        task_id = broker.enqueue("after")
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join(5)
    assert [pk for _, pk, _ in got] == [task_id]
    assert got[0][0] - queued_at < 0.5 * FALLBACK_S


@direct
def test_an_ended_session_fails_one_dequeue_with_a_django_error_then_listens_again():
    broker = get_broker()
    assert broker.dequeue() is None  # listens, returns at once
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        pid = cur.fetchone()[0]
    killer = _listener()
    killer.execute("SELECT pg_terminate_backend(%s)", [pid])
    killer.close()
    with pytest.raises(DatabaseError):
        broker.dequeue()
    assert broker.dequeue() is None  # a new session: listens again
    task_id = broker.enqueue("x")
    assert broker.dequeue() == [(task_id, "x")]


def test_behind_a_transaction_pooler_the_pusher_polls_and_never_listens():
    broker = get_broker()
    with override_settings(AGENTOPS_DB_POOLER="transaction"):
        stop, _, statements, thread = _start(broker)
        time.sleep(1.0)
        stop.set()
        thread.join(5)
    assert not any("LISTEN" in sql for sql in statements)
    assert len(statements) >= 5  # polled every `poll`


def _listener():
    conn = pg_session(autocommit=True)
    conn.execute(f"LISTEN {CHANNEL}")
    return conn
