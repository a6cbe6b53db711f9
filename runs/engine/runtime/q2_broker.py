"""q2's ORM broker, woken by PostgreSQL when a task is queued instead of polling the table.

q2's ORM broker has its pusher ask the queue table every ``poll`` (0.05 s) and replace its
connection before each query (``close_old_connections``, which with Django's health checks
is a ``SELECT 1`` more): forty statements a second on an idle host, a quarter of a worker
host's idle CPU. On PostgreSQL this broker instead:

- queues a task and ``pg_notify``s the channel in one statement (delivered when the
  enqueuing transaction commits, so never before the task is visible);
- takes due tasks in one statement (``FOR UPDATE SKIP LOCKED``: hosts never wait on each
  other's claims; oldest first);
- when nothing is due, waits on the pusher's own session (``LISTEN``) for a notification,
  at most ``FALLBACK_S``: a task whose lock ran out (q2's ``retry``) is due without any
  insert, and a host of an older version inserts without notifying;
- checks its connection at most every ``_TIDY_S`` (or after an error), not before each query.

Behind a transaction pooler (runs.pooler) no session outlives a transaction, so no LISTEN:
the pusher polls every ``poll`` as q2 does. Off PostgreSQL everything is q2's own.
"""
from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

from django.db import connections
from django.utils import timezone
from django_q.brokers.orm import ORM
from django_q.conf import Conf

from runs.pooler import pooled

CHANNEL = "agentops_q2"
FALLBACK_S = 1.0  # the longest a pusher waits for a notification before it asks the table
_TIDY_S = 1.0  # how often a pusher or monitor thread checks its connection (no error seen)
_ENQUEUE_SQL = ("WITH t AS (INSERT INTO django_q_ormq (key, payload, lock) VALUES (%s, %s, %s) "
                "RETURNING id) SELECT id, pg_notify(%s, '') FROM t")
_CLAIM_SQL = ("UPDATE django_q_ormq SET lock = %s WHERE id IN (SELECT id FROM django_q_ormq "
              "WHERE key = %s AND lock < %s ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED) "
              "RETURNING id, payload")
_DELETE_SQL = "DELETE FROM django_q_ormq WHERE id = %s"
_tidied = threading.local()  # per thread: when its connection was last checked


class ListeningBroker(ORM):
    """q2's ORM broker, on PostgreSQL woken by ``NOTIFY`` instead of polling (module doc)."""

    def enqueue(self, task: str) -> Any:
        """Queue the signed ``task`` and notify the pushers; return its id."""
        if connections[Conf.ORM].vendor != "postgresql":
            return super().enqueue(task)
        self.get_connection()  # q2's own check first: its callers (slot threads) expect it
        with connections[Conf.ORM].cursor() as cur:
            cur.execute(_ENQUEUE_SQL, [self.list_key or Conf.CLUSTER_NAME, task,
                                       timezone.now(), CHANNEL])
            return cur.fetchone()[0]

    def dequeue(self) -> list[tuple[int, str]] | None:
        """Take the due tasks; none due: wait for a notification (or ``FALLBACK_S``)."""
        conn = connections[Conf.ORM]
        if conn.vendor != "postgresql":
            return super().dequeue()
        _connection_tidy(conn)
        now = timezone.now()
        with conn.cursor() as cur:
            cur.execute(_CLAIM_SQL, [now + timedelta(seconds=Conf.RETRY), self.list_key,
                                     now, Conf.BULK])
            tasks = cur.fetchall()
        if tasks:
            return tasks
        self._wait(conn)
        return None

    def delete(self, task_id: Any) -> None:
        """Remove the task ``task_id`` (acknowledged, or failed to unpack)."""
        conn = connections[Conf.ORM]
        if conn.vendor != "postgresql":
            return super().delete(task_id)
        _connection_tidy(conn)
        with conn.cursor() as cur:
            cur.execute(_DELETE_SQL, [task_id])
        return None

    def _wait(self, conn: Any) -> None:
        """Wait until a task is queued (a notification), at most ``FALLBACK_S``.

        The channel is listened to on the pusher's own session; a new session (the old
        one failed or aged out) listens first and returns at once, since a notification
        sent before its LISTEN never reaches it: the table is asked once more.
        """
        session = conn.connection
        if pooled() or session is None or conn.in_atomic_block:
            time.sleep(Conf.POLL)
            return
        if getattr(self, "_listening", None) is not session:
            with conn.cursor() as cur:
                cur.execute(f"LISTEN {CHANNEL}")
            self._listening = session
            return
        with conn.wrap_database_errors:
            for _ in session.notifies(timeout=FALLBACK_S, stop_after=1):
                pass


def _connection_tidy(conn: Any) -> None:
    """Replace ``conn`` if it failed or aged out, checking at most every ``_TIDY_S``.

    q2's broker does it before every query (``close_old_connections``); with Django's health
    checks on, each check is one more statement.
    """
    if conn.in_atomic_block:
        return
    now = time.monotonic()
    if conn.errors_occurred or now - getattr(_tidied, conn.alias, 0.0) >= _TIDY_S:
        conn.close_if_unusable_or_obsolete()
        setattr(_tidied, conn.alias, now)
