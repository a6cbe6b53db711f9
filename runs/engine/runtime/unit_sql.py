"""A lease holder's unit as ONE SQL statement on PostgreSQL: one round trip, one commit.

Through the ORM a unit is BEGIN, the Run's conditional UPDATE, one INSERT per table (events,
ledger rows, attempts, snapshot), the step updates and COMMIT: six or more round trips, most
of a step's time. Here the same writes are one data-modifying ``WITH`` statement run in
autocommit, which PostgreSQL executes as one transaction:

    WITH r AS (UPDATE runs_run SET ... WHERE id = %s AND version = %s RETURNING id),
         w0 AS (INSERT INTO runs_event (...) SELECT ... FROM r, jsonb_populate_recordset(...)),
         w1 AS (INSERT INTO ledger_toolcall ... RETURNING id, tool_call_id),
         w2 AS (INSERT INTO ledger_toolattempt ... LEFT JOIN w1 ON ...),   -- ids of w1's rows
         w3 AS (UPDATE runs_step SET ... FROM r WHERE ...)
    SELECT (SELECT count(*) FROM r), ...

Every write reads FROM ``r``, so when the version check fails nothing at all is written and
the caller raises LeaseLost. Rows travel as one JSON array per table and PostgreSQL types
them with ``jsonb_populate_recordset`` (no per-column casts, one parameter per table).

Only declarative writers (``agentops.writes``) fold in; a unit holding any other writer, an
update of a row inserted in the same unit, or two updates of one row takes the ORM path
(``unit_where.foldable``).
"""
from __future__ import annotations

import datetime as dt
import json
import threading
from asyncio import _get_running_loop
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import DateTimeField, ForeignKey, JSONField, Model

from agentops.hot_settings import hot_setting
from agentops.writes import RowsInsert
from runs.engine.runtime import unit_overlap
from runs.engine.runtime.prepared import prepared_row
from runs.engine.runtime.unit_events import events_json
from runs.engine.runtime.unit_rows import NotYet as _NotYet
from runs.engine.runtime.unit_rows import plan as _plan
from runs.engine.runtime.unit_rows import rows_json as _rows_json
from runs.engine.runtime.unit_where import where_sql
from runs.models import Event, Run, run_id_text
from runs.models.event import event_month
from runs.pooler import pooled

_PLAIN = {int, str, bool, type(None)}  # stored as they are by every field but JSONField


def enabled() -> bool:
    """Return whether units may be written as one statement here (PostgreSQL, setting on)."""
    return _vendor() == "postgresql" and hot_setting("AGENTOPS_UNIT_SQL")


@cache
def _vendor() -> str:
    """Return the default database's vendor: one backend class for every thread, read once
    (``connection.vendor`` finds this thread's connection object on each read)."""
    return connections[DEFAULT_DB_ALIAS].vendor


def _default_db() -> Any:
    """Return ``connections[DEFAULT_DB_ALIAS]``, this thread's own, read as asgiref reads it.

    The handler keeps each thread's connections in asgiref's thread-critical Local: outside
    an event loop, a ``threading.local``. Read through the handler a lookup costs three
    Python calls and a RuntimeError raised and caught (``asyncio.get_running_loop``), about
    ten times this; a unit needs the connection three times. Anything else (an event loop
    running, another Local, no connection made yet) goes through the handler.
    """
    storage = getattr(connections._connections, "_storage", None)
    if isinstance(storage, threading.local) and _get_running_loop() is None:
        db = getattr(storage, DEFAULT_DB_ALIAS, None)
        if db is not None:
            return db
    return connections[DEFAULT_DB_ALIAS]


def unit_write(*, run: Run, events: Sequence[Any], first_seq: int, at: dt.datetime,
               expected_version: int, values: dict[str, Any], also: Sequence[Any],
               owner: str = "", overlap: bool = False) -> bool:
    """Write the unit in one statement; return False when the version check failed.

    ``events`` are runs.engine.runtime.events.NewEvent, numbered from ``first_seq``. With ``owner``
    the run must also still be leased to it (the fence before a side effect).

    ``overlap`` (a progress unit): send it and return True before it commits, when this
    connection is outside a transaction (runs.engine.runtime.unit_overlap); its version
    check is then learnt when it is read, by a later unit (which raises UnitNotCommitted)
    or any other use of the connection. Units go out in order, at most
    ``AGENTOPS_UNITS_IN_FLIGHT`` of them unread; any other unit reads them all first.

    Built while that one is in flight (the server commits it meanwhile): only its new ids can
    matter, and a row needing one (``_NotYet``) is built again once it is read.
    """
    db = _default_db()
    ops = [op for op in also if not (isinstance(op, RowsInsert) and not op.rows)]
    send = overlap and hot_setting("AGENTOPS_UNIT_OVERLAP") and not db.in_atomic_block
    link = unit_overlap.unit_link(db.connection) if send and not pooled() else None
    args = (run, events, first_seq, at, expected_version, values, ops, owner, db)
    built = _early(args, db, send, link)
    # Sent without waiting and tied to them, it may follow units still in flight (their ids
    # not needed); otherwise (untied behind a pooler, not sent this way) it follows none.
    keep = unit_overlap.in_flight_bound() - 1 if link and built is not None else 0
    unit_overlap.settled(db.connection, keep=keep)
    if built is None:  # built now, after every unit in flight: it follows none of them
        link = link and unit_overlap.UnitLink(link.tag, None)
        built = (*_built(*args, link, early=False), None)
    sql, params, keyed, dumped = built
    if send:
        _send(db, sql, params, keyed, run, dumped, tag=link.tag if link else None)
        return True
    row = prepared_row(db, sql, params)  # prepared once per shape: planning costs as much
    if row[0] != 1:
        return False
    for (_, op), ids in zip(keyed, row[1:]):
        _set_pks(op, json.loads(ids) if isinstance(ids, str) else ids, db.alias)
    return True


def _early(args: tuple, db: Any, send: bool,
           link: unit_overlap.UnitLink | None) -> tuple | None:
    """Return the unit built (params dumped) before the one in flight is read, or _NotYet's None."""
    try:
        built = _built(*args, link, early=True)
        if send and db.connection is not None:
            with db.wrap_database_errors:
                return *built, unit_overlap.unit_dumped(db.connection, built[1])
        return *built, None
    except _NotYet:
        return None
    except Exception:
        unit_overlap.settled(db.connection)  # a unit in flight that failed is told first
        raise


def _built(run: Run, events: Sequence[Any], first_seq: int, at: dt.datetime,
           expected_version: int, values: dict[str, Any], ops: list[Any], owner: str,
           db: Any, link: unit_overlap.UnitLink | None = None, *,
           early: bool) -> tuple[str, list[Any], list[tuple[int, RowsInsert]]]:
    """Return the unit's SQL, its parameters and its keyed inserts (``early``: see _rows_json;
    ``link``: the tag it leaves on its session and the one it must find there)."""
    json_names = _json_names(Run)  # _prep's first case inline: most Run values are plain
    params = [value if type(value) in _PLAIN and name not in json_names
              else _prep(Run, name, value, db) for name, value in values.items()]
    params += [run.pk, expected_version] + ([owner] if owner else [])
    after = link.after if link else None
    params += ([after] if after else []) + ([link.tag] if link else [])
    shape, keyed = _unit_parts(run, events, first_seq, at, ops, db, params, early)
    sql = _statement(tuple(values), tuple(shape), tuple(i for i, _ in keyed), bool(owner),
                     bool(after), bool(link))
    return sql, params, keyed


def _unit_parts(run: Run, events: Sequence[Any], first_seq: int, at: dt.datetime,
                ops: Sequence[Any], db: Any, params: list[Any],
                early: bool = False) -> tuple[list[tuple], list]:
    """Return the statement's shape and the inserts whose new ids come back (by position);
    append each part's parameters to ``params``."""
    shape: list[tuple] = []
    inserted: tuple[type[Model], ...] = ()
    mine: set[int] = set()  # id() of the rows inserted so far
    keyed: list[tuple[int, RowsInsert]] = []
    if events:
        shape.append(("i", Event, ()))
        params.append(events_json(run_id_text(run), events, first_seq, at, event_month(run)))
        inserted = (Event,)
    for op in ops:
        if isinstance(op, RowsInsert):
            refs = _references(op.model, inserted)
            shape.append(("i", op.model, refs))
            params.append(_rows_json(op, refs, mine if early else None))
            inserted += (op.model,)
            mine.update(map(id, op.rows))
            if _plan(op.model).natural and op.rows[0].pk is None:
                keyed.append((len(shape) - 1, op))
        else:
            shape.append(("u", op.model, tuple(op.values), tuple(op.where)))
            params += [_prep(op.model, k, v, db) for k, v in op.values.items()]
            params += [_prep(op.model, k, v, db) for k, v in op.where.items()]
    return shape, keyed


def unit_settled(*, quiet: bool = False) -> None:
    """Read the unit still in flight on this thread's connection; raise if it did not commit
    (``quiet``: forget it, for a tick that is failing anyway)."""
    if _vendor() == "postgresql":  # units are in flight only there
        unit_overlap.settled(_default_db().connection, quiet=quiet)


def unit_after_commit(fn: Callable[[], None]) -> None:
    """Call ``fn`` once the unit just written committed: now, or when its result is read."""
    if _vendor() == "postgresql":
        unit_overlap.after_commit(_default_db().connection, fn)
    else:
        fn()


def _send(db: Any, sql: str, params: list[Any], keyed: list[tuple[int, RowsInsert]],
          run: Run, dumped: list[Any] | None = None, *, tag: str | None = None) -> None:
    """Send the unit without waiting; the new ids of its keyed rows are set when it is read."""
    if db.connection is None:  # ensure_connection's own test (behind its async check)
        db.ensure_connection()
    db.validate_no_broken_transaction()

    def on_row(row: list[bytes | None]) -> None:
        for (_, op), ids in zip(keyed, row[1:]):
            _set_pks(op, json.loads(ids.decode()) if ids else {}, db.alias)  # UTF-8 text

    with db.wrap_database_errors:
        unit_overlap.unit_send(db.connection, sql, params, f"run {run_id_text(run)}'s unit",
                               on_row, named=not pooled(), dumped=dumped, tag=tag)


def _prep(model: type[Model], name: str, value: Any, db: Any) -> Any:
    f, as_is, stamp = _field(model, name)
    if as_is or (type(value) in _PLAIN and not isinstance(f, JSONField)):
        return value
    if stamp and type(value) is dt.datetime and value.tzinfo is not None:
        return value  # what DateTimeField.get_db_prep_save makes of it on PostgreSQL
    return f.get_db_prep_save(value, db)


@cache
def _json_names(model: type[Model]) -> frozenset[str]:
    """Return the names of ``model``'s JSON fields (their plain values still go through
    get_db_prep_save)."""
    return frozenset(f.name for f in model._meta.concrete_fields if isinstance(f, JSONField))


@cache
def _field(model: type[Model], name: str) -> tuple[Any, bool, bool]:
    """Return the field ``name`` names, whether its values go to the driver as they are, and
    whether it is a DateTimeField."""
    if "__" in name:  # fk__field: a field of the related row
        fk, rest = name.split("__", 1)
        return _field(model._meta.get_field(fk).related_model, rest)
    f = model._meta.pk if name == "pk" else model._meta.get_field(name)
    return f, isinstance(f, ForeignKey), isinstance(f, DateTimeField)


_TAG = "agentops.unit"  # the session setting a unit in flight leaves for the one behind it


@cache
def _statement(run_fields: tuple[str, ...], shape: tuple[tuple, ...],
               keyed: tuple[int, ...], fenced: bool = False, chained: bool = False,
               tagged: bool = False) -> str:
    """Return the SQL of a unit of this shape (the same few shapes repeat: cached).

    ``tagged``: the run's update leaves the unit's tag on the session (``set_config``, kept
    only when it commits); ``chained``: it runs only where the unit it follows left its own
    (runs.engine.runtime.unit_overlap, "Units in flight").
    """
    sets = ", ".join(f"{_q(Run._meta.get_field(n).column)} = %s" for n in run_fields)
    owner = f" AND {_q('lease_owner')} = %s" if fenced else ""
    owner += f" AND current_setting('{_TAG}', true) = %s" if chained else ""
    tag = f", set_config('{_TAG}', %s, false)" if tagged else ""
    ctes = [f"r AS (UPDATE {_q(Run._meta.db_table)} SET {sets} "
            f"WHERE {_q('id')} = %s AND {_q('version')} = %s{owner} RETURNING {_q('id')}{tag})"]
    names: dict[type[Model], str] = {}
    for i, part in enumerate(shape):
        name = f"w{i}"
        if part[0] == "i":
            ctes.append(_insert_sql(name, part[1], {att: names[m] for att, m in part[2]}))
            names[part[1]] = name
        else:
            ctes.append(_update_sql(name, part[1], part[2], part[3]))
    returned = "".join(
        f", (SELECT coalesce(jsonb_object_agg({_q(_plan(shape[i][1]).natural.column)}, "
        f"{_q(_plan(shape[i][1]).pk)}), '{{}}'::jsonb) FROM w{i})" for i in keyed)
    return f"WITH {', '.join(ctes)} SELECT (SELECT count(*) FROM r){returned}"


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


@cache
def _references(model: type[Model],
                inserted: tuple[type[Model], ...]) -> tuple[tuple[str, type[Model]], ...]:
    """Return (FK attname, target model) for FKs whose targets this unit inserts earlier
    (the same few unit shapes repeat: cached)."""
    return tuple((c.attname, c.fk_model) for c in _plan(model).cols
                 if c.fk_model is not None and c.fk_model in inserted
                 and _plan(c.fk_model).natural)


def _insert_sql(name: str, model: type[Model], refs: dict[str, str]) -> str:
    plan = _plan(model)
    table = _q(plan.table)
    joins, select = [], []
    for c in plan.cols:
        if c.attname in refs:
            alias = f"{name}_{c.column}"
            joins.append(f"LEFT JOIN {refs[c.attname]} {alias} ON "
                         f"{alias}.{_q(_plan(c.fk_model).natural.column)}::text = j->>'${c.attname}'")
            select.append(f"coalesce(x.{_q(c.column)}, {alias}.{_q(_plan(c.fk_model).pk)})")
        else:
            select.append(f"x.{_q(c.column)}")
    returning = f" RETURNING {_q(plan.pk)}, {_q(plan.natural.column)}" if plan.natural else ""
    rows = (f"jsonb_populate_recordset(NULL::{table}, %s::jsonb) x" if not joins else
            f"jsonb_array_elements(%s::jsonb) j CROSS JOIN LATERAL jsonb_populate_record("
            f"NULL::{table}, j) x")  # per element only where a row refers to an earlier one
    return (f"{name} AS (INSERT INTO {table} ({', '.join(_q(c.column) for c in plan.cols)}) "
            f"SELECT {', '.join(select)} FROM r CROSS JOIN {rows} {' '.join(joins)}{returning})")


def _update_sql(name: str, model: type[Model], values: tuple[str, ...],
                where: tuple[str, ...]) -> str:
    meta = model._meta
    sets = ", ".join(f"{_q(meta.get_field(n).column)} = %s" for n in values)
    wheres = " AND ".join(where_sql(model, n) for n in where)
    return f"{name} AS (UPDATE {_q(meta.db_table)} SET {sets} FROM r WHERE {wheres} RETURNING 1)"


def _set_pks(op: RowsInsert, ids: dict[str, int], alias: str) -> None:
    key = _plan(op.model).natural.attname
    for obj in op.rows:
        obj.pk = ids.get(getattr(obj, key))
        obj._state.adding = False
        obj._state.db = alias
