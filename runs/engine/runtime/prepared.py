"""Statements a tick sends every time, prepared once per connection on PostgreSQL.

Django's cursors bind parameters client-side, so PostgreSQL plans each statement again on
every call; for the tick's fixed statements (the claim, the read of a run's unknown calls at
its end) planning costs as much as running. A psycopg cursor on the same connection prepares
each one once (as runs.engine.runtime.unit_sql does for units); behind a transaction pooler
(runs.pooler) it is sent unnamed, since the next server may not know it. psycopg takes the
connection's lock first, which reads a unit still in flight (runs.engine.runtime.unit_overlap).
"""
from __future__ import annotations

from typing import Any

import psycopg
from django.db import connection

from runs.pooler import pooled

_NEVER = 2**31


def prepared_rows(sql: str, params: list[Any]) -> list[tuple]:
    """Run ``sql`` (``%s`` parameters) as a prepared statement; return its rows."""
    connection.ensure_connection()
    raw, prepare = connection.connection, not pooled()
    if prepare and raw.prepare_threshold is None:
        # Django turns psycopg's own preparing off; a threshold no query reaches keeps it off
        # for Django's queries while the ones that ask are prepared (as unit_sql does).
        raw.prepare_threshold = _NEVER
    with connection.wrap_database_errors, psycopg.Cursor(raw) as cursor:
        cursor.execute(sql, params, prepare=prepare)
        return cursor.fetchall()
