"""Statements a tick sends every time, prepared once per connection on PostgreSQL.

Django's cursors bind parameters client-side, so PostgreSQL plans each statement again on
every call; for the tick's fixed statements (the claim, the read of a run's unknown calls at
its end) planning costs as much as running. A psycopg cursor on the same connection prepares
each one once (as runs.engine.runtime.unit_sql does for units); behind a transaction pooler
(runs.pooler) it is sent unnamed, since the next server may not know it. psycopg takes the
connection's lock first, which reads a unit still in flight (runs.engine.runtime.unit_overlap).
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import psycopg
from django.db import connection, transaction

from runs.pooler import pooled

_NEVER = 2**31


def prepared_rows(sql: str, params: list[Any]) -> list[tuple]:
    """Run ``sql`` (``%s`` parameters) as a prepared statement; return its rows."""
    connection.ensure_connection()
    raw, prepare = _preparing(connection.connection)
    with connection.wrap_database_errors, psycopg.Cursor(raw) as cursor:
        cursor.execute(sql, params, prepare=prepare)
        return cursor.fetchall()


def prepared_row(db: Any, sql: str, params: list[Any]) -> tuple:
    """Run ``sql`` on ``db`` (a Django connection) as a prepared statement; return its one row.

    Outside a transaction (a worker) the statement commits on its own. Inside one (a caller's
    atomic block, a test) it gets a savepoint, so a failure leaves the outer transaction usable.
    """
    db.ensure_connection()
    db.validate_no_broken_transaction()
    raw, prepare = _preparing(db.connection)
    with transaction.atomic(using=db.alias) if db.in_atomic_block else nullcontext():
        with db.wrap_database_errors, psycopg.Cursor(raw) as cursor:
            cursor.execute(sql, params, prepare=prepare)
            return cursor.fetchone()


def _preparing(raw: Any) -> tuple[Any, bool]:
    """Return ``raw`` and whether to prepare on it (not behind a pooler)."""
    prepare = not pooled()
    if prepare and raw.prepare_threshold is None:
        # Django turns psycopg's statement preparation off (for transaction-mode poolers);
        # None would ignore prepare=True too. A threshold no query reaches keeps Django's own
        # queries unprepared while ours, which ask, are prepared once per connection.
        raw.prepare_threshold = _NEVER
    return raw, prepare
