"""How a unit's update names its row: by its columns, or through a related row's unique key.

A writer made while the unit inserting a ledger row is still in flight (sent, not read:
runs.engine.runtime.unit_overlap) does not know that row's id. It names the row by its own
unique text key instead (``tool_call_id``), and a row pointing at it through the foreign key
(``tool_call__tool_call_id``); the unit's one statement looks the id up (``where_sql``), the
ORM path filters across the relation.

``foldable`` says which writers a unit's one statement (runs.engine.runtime.unit_sql) can hold.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Model

from agentops.writes import RowsInsert, RowsUpdate

UNKNOWN = object()  # a ``where`` name a row has no attribute for: assume it may match


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def row_value(row: Model, name: str) -> Any:
    """Return ``row``'s value of a ``where`` name (``fk__field`` through a related object it
    holds, never a query), or ``UNKNOWN``."""
    if "__" not in name:
        return getattr(row, name, UNKNOWN)
    fk, rest = name.split("__", 1)
    related = row._state.fields_cache.get(fk, UNKNOWN)
    return UNKNOWN if related is UNKNOWN or related is None else row_value(related, rest)


def where_sql(model: type[Model], name: str) -> str:
    """Return ``column = %s`` for a ``where`` name; ``fk__field`` looks the related row's id up
    (a row a unit still in flight inserted, whose id the writer did not know)."""
    meta = model._meta
    table = _q(meta.db_table)
    if "__" not in name:
        return f"{table}.{_q((meta.pk if name == 'pk' else meta.get_field(name)).column)} = %s"
    fk, rest = name.split("__", 1)
    field = meta.get_field(fk)
    target = field.related_model._meta
    return (f"{table}.{_q(field.column)} = (SELECT {_q(target.db_table)}.{_q(target.pk.column)} "
            f"FROM {_q(target.db_table)} WHERE {where_sql(field.related_model, rest)})")


def foldable(also: Sequence[Any]) -> bool:
    """Return whether every writer in ``also`` can be folded into the unit's one statement."""
    inserted: dict[type[Model], list[Model]] = {}
    updated: set[tuple[type[Model], tuple]] = set()
    updates: list[RowsUpdate] = []
    for op in also:
        if isinstance(op, RowsInsert):
            if op.rows:  # an empty insert writes nothing (unit_write leaves it out)
                inserted.setdefault(op.model, []).extend(op.rows)
        elif isinstance(op, RowsUpdate):
            if any(v is None for v in op.where.values()) or any(
                    hasattr(v, "resolve_expression") for v in op.values.values()):
                return False
            key = (op.model, tuple(sorted(op.where.items())))
            if key in updated:
                return False  # one statement cannot update the same row twice
            updated.add(key)
            updates.append(op)
        else:
            return False
    return not any(_may_match(op, inserted.get(op.model, ())) for op in updates)


def _may_match(op: RowsUpdate, rows: Sequence[Model]) -> bool:
    """Return whether ``op`` may be meant for one of ``rows``, inserted by the same statement.

    A sibling part of one statement does not see the rows another inserts, so such an update
    would miss its row. A row cannot match when one of the update's (non-NULL) values differs
    from the row's own: NULL never equals it, and a column the statement fills in (a new id,
    the id of a row inserted before it) gets a fresh value, never one already in use.
    """
    return any(all(row_value(row, k) in (v, UNKNOWN) for k, v in op.where.items())
               for row in rows)
