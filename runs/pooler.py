"""A transaction-mode pooler (PgBouncer) in front of PostgreSQL, and the owner sessions.

In transaction mode a client's session lasts one transaction: the next one may run on
another server connection. What AgentOps kept in a session, and what it does instead with
``AGENTOPS_DB_POOLER=transaction`` (docs/deploy.md, "Behind PgBouncer"):

- server-side prepared statements (a progress unit's statement, runs.engine.runtime.unit_sql
  and unit_overlap): sent unnamed, parsed each time (PgBouncer 1.18 keeps no prepared
  statements; Django and the lease keeper never prepare: ``prepare_threshold=None``);
- named cursors (Django's ``.iterator()``): off (``DISABLE_SERVER_SIDE_CURSORS``);
- ``SET`` of ``TimeZone`` and ``application_name`` (Django, runs.apps): PgBouncer tracks
  both per client and sets them again on each server connection it hands out;
- release on death (runs.engine.runtime.recovery): a lease owner ``host:pid`` counted as
  alive while a session of that name exists. Through the pooler a server connection carries
  the name of whichever client used it last, so a live worker may have none and a dead one's
  name may linger. A worker process therefore holds one session of its own *directly* on
  PostgreSQL (``AGENTOPS_DB_DIRECT_URL``), named after it and opened before its first claim;
  its pooled sessions are named ``pooled host:pid``, which no owner matches. Without a direct
  URL nothing is judged dead by name: runs wait out their lease TTL.

- ``LISTEN`` (q2's pusher waits for the ``NOTIFY`` of a queued task on its own session,
  runs.engine.runtime.q2_broker): the pusher polls the queue table instead.

No advisory lock is used anywhere (live updates go through the channel layer); the lease
itself was always a row (``lease_owner``, ``lease_expires_at``), fenced by version and
owner at every commit, so none of this touches a lease check.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any

import psycopg
from django.conf import settings

from runs.engine.runtime.queue import worker_name
from agentops.hot_settings import hot_setting

_CHECK_S = 5.0  # how often a held owner session is checked to be alive (one SELECT 1)
_lock = threading.Lock()
_owner: dict[str, Any] = {"conn": None, "pid": 0, "checked": 0.0}
_inherited: list[Any] = []  # a parent's session after a fork: never used, never finalized


def pooled() -> bool:
    """Return True when a transaction-mode pooler stands between AgentOps and PostgreSQL."""
    return hot_setting("AGENTOPS_DB_POOLER") == "transaction"


def session_name() -> str:
    """Return the application_name this process gives its ordinary (pooled) sessions.

    ``host:pid`` tells the sweeper a lease owner is alive; behind a pooler only the owner
    session (``owner_session_hold``) may carry it.
    """
    name = worker_name()
    return (f"pooled {name}" if pooled() else name)[:63]


def owners_judged() -> bool:
    """Return True when a session named after a lease owner means that owner is alive."""
    return not pooled() or bool(settings.AGENTOPS_DB_DIRECT_URL)


def owner_session_hold() -> None:
    """Make sure this process holds its owner session before it claims a lease.

    Only behind a pooler with ``AGENTOPS_DB_DIRECT_URL`` set: a direct session named
    ``host:pid`` kept open for the process's life (its death closes it), checked at most
    every few seconds and opened again if it broke. It runs no query otherwise.
    """
    if not pooled() or not settings.AGENTOPS_DB_DIRECT_URL:
        return
    with _lock:
        conn, now = _owner["conn"], time.monotonic()
        if conn is not None and _owner["pid"] != os.getpid():
            _inherited.append(conn)  # closing it would end the parent's session
            conn = None
        if conn is not None and not conn.closed and now - _owner["checked"] < _CHECK_S:
            return
        if conn is not None and not conn.closed:
            try:
                conn.execute("SELECT 1")
                _owner["checked"] = now
                return
            except psycopg.Error:
                conn.close()
        _owner["conn"] = psycopg.connect(settings.AGENTOPS_DB_DIRECT_URL, autocommit=True,
                                         application_name=worker_name()[:63],
                                         prepare_threshold=None, connect_timeout=10)
        _owner["pid"], _owner["checked"] = os.getpid(), now
