"""How a unit's update names its row: by its columns, or through a related row's unique key.

A writer made while the unit inserting a ledger row is still in flight (sent, not read:
runs.engine.runtime.unit_overlap) does not know that row's id. It names the row by its own
unique text key instead (``tool_call_id``), and a row pointing at it through the foreign key
(``tool_call__tool_call_id``); the unit's one statement looks the id up (``where_sql``), the
ORM path filters across the relation.
"""
from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models import Model

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
