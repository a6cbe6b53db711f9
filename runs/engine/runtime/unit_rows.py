"""A unit's inserted rows as the JSON text its one statement reads (runs.engine.runtime.unit_sql).

Each row is one JSON object ``jsonb_populate_record`` turns into a row of its table: the
values of its concrete fields by column, as the ORM would store them.
"""
from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from json.encoder import encode_basestring_ascii as _ascii_str  # how _ROWS_JSON writes a str
from operator import itemgetter
from typing import Any

from django.db.models import (AutoField, BigAutoField, DateTimeField, ForeignKey, Model,
                              SmallAutoField, UniqueConstraint)
from django.utils import timezone

from agentops.jsonstate import json_encoder
from agentops.writes import RowsInsert

_AUTO = (AutoField, BigAutoField, SmallAutoField)
_ROWS_JSON = json_encoder(compact=True)  # made once (see agentops.jsonstate)
_AS_IS = {"CharField", "TextField", "IntegerField", "BigIntegerField", "SmallIntegerField",
          "PositiveIntegerField", "PositiveSmallIntegerField", "PositiveBigIntegerField",
          "BooleanField", "JSONField"}


@dataclass(frozen=True)
class _Col:
    attname: str
    column: str
    field: Any
    fk_model: type[Model] | None
    stamped: bool  # auto_now / auto_now_add: pre_save sets it
    as_is: bool  # JSON and driver agree on its Python values (text, numbers, booleans)
    now_stamped: bool = False  # stamped by DateTimeField's own pre_save: timezone.now()


@dataclass(frozen=True)
class _Plan:
    table: str
    pk: str
    cols: tuple[_Col, ...]
    natural: _Col | None  # a unique text column other rows of the unit can refer to
    plain: tuple[str, ...]  # the columns whose values go into the JSON as they are
    plain_of: Callable[[dict[str, Any]], tuple]  # their values from a row's __dict__
    plain_atts: tuple[str, ...]  # their attnames (a deferred one: read through the model)
    rest: tuple[_Col, ...]  # stamped, foreign-key and converted columns


@cache
def plan(model: type[Model]) -> _Plan:
    """Return how the rows of ``model`` are written (made once per model)."""
    meta = model._meta
    cols = tuple(_col(f) for f in meta.concrete_fields
                 if not (f.primary_key and isinstance(f, _AUTO)))
    single = {c.fields[0] for c in meta.constraints if isinstance(c, UniqueConstraint)
              and len(c.fields) == 1 and c.condition is None}
    natural = next((c for c in cols if (c.field.unique or c.field.name in single)
                    and not c.field.primary_key
                    and c.field.get_internal_type() == "CharField"), None)
    plain = tuple(c for c in cols if c.as_is and not c.stamped and c.fk_model is None)
    rest = tuple(c for c in cols if c not in plain)
    atts = tuple(c.attname for c in plain)
    return _Plan(meta.db_table, meta.pk.column, cols, natural, tuple(c.column for c in plain),
                 _values_of(atts), atts, rest)


def _col(f: Any) -> _Col:
    stamped = bool(getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False))
    return _Col(f.attname, f.column, f, f.related_model if isinstance(f, ForeignKey) else None,
                stamped, f.get_internal_type() in _AS_IS,
                stamped and isinstance(f, DateTimeField)
                and type(f).pre_save is DateTimeField.pre_save)


def _values_of(atts: tuple[str, ...]) -> Callable[[dict[str, Any]], tuple]:
    """Return a function reading ``atts`` from a dict as a tuple (one C call for a row)."""
    if len(atts) > 1:
        return itemgetter(*atts)
    return lambda values: tuple(values[att] for att in atts)


class NotYet(Exception):
    """A row refers to a row whose id is not known yet: maybe one the unit in flight inserts."""


def rows_json(op: RowsInsert, refs: tuple[tuple[str, type[Model]], ...],
              early: set[int] | None = None) -> str:
    """Return the rows as the JSON array ``jsonb_populate_record`` reads.

    A key left out reads as NULL there, as a JSON null does: None values are not sent (a
    ledger row is half empty columns), so the worker encodes and the server parses less.
    ``early`` (built before the unit in flight is read: the ``id()`` of the rows this unit
    inserts before these): raise NotYet for a row whose related row has no id yet and is
    not one of them.
    """
    shape = plan(op.model)
    ref_keys = {att: plan(m).natural.attname for att, m in refs}
    docs = []
    now = stamp = None  # what DateTimeField.pre_save stamps (read once for the rows), as text
    for obj in op.rows:
        try:
            row = shape.plain_of(obj.__dict__)  # a model instance keeps its values here
        except KeyError:  # a deferred field: read through the model
            row = tuple(getattr(obj, att) for att in shape.plain_atts)
        doc = {col: v for col, v in zip(shape.plain, row) if v is not None}
        for c in shape.rest:
            if c.now_stamped:
                if now is None:
                    now = timezone.now()
                    stamp = now.isoformat()
                setattr(obj, c.attname, now)
                doc[c.column] = stamp
                continue
            value = c.field.pre_save(obj, True) if c.stamped else getattr(obj, c.attname)
            if value is None and c.fk_model is not None:
                value = _related_pk(obj, c, ref_keys, early)
            if value is None:
                if c.attname in ref_keys:
                    doc["$" + c.attname] = getattr(getattr(obj, c.field.name), ref_keys[c.attname])
                continue
            text = None if c.as_is else _TO_JSON.get(type(value), _json_value)
            doc[c.column] = text(value) if text else value
        docs.append(doc)
    return _ROWS_JSON(docs) if op.json_texts is None else _pasted(docs, op.json_texts)


def _pasted(docs: list[dict[str, Any]], texts: list[dict[str, str]]) -> str:
    """Return ``docs`` as ``rows_json``'s JSON array, each row's ``texts`` (column -> JSON text
    of its value) pasted in for those values: jsonb reads the same values from either."""
    rows = []
    for doc, pasted in zip(docs, texts, strict=True):
        own = _ROWS_JSON({col: v for col, v in doc.items() if col not in pasted})
        more = "".join(f",{_ascii_str(col)}:{text}" for col, text in pasted.items())
        rows.append(own[:-1] + more + "}" if own != "{}" else "{" + more[1:] + "}")
    return "[" + ",".join(rows) + "]"


def _related_pk(obj: Model, c: Any, ref_keys: dict[str, str], early: set[int] | None) -> Any:
    """Return the id of the row ``obj`` refers to through ``c``, made before that row's id
    came back (a unit read since), as the ORM reads it; raise NotYet (see ``rows_json``)."""
    related = obj._state.fields_cache.get(c.field.name)
    value = getattr(related, "pk", None)
    if value is None and related is not None and early is not None and not (
            c.attname in ref_keys and id(related) in early):
        raise NotYet
    return value


def _json_value(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if type(value) is uuid.UUID:
        return _uuid_text(value)
    if isinstance(value, (uuid.UUID, decimal.Decimal)):
        return str(value)
    return value


@lru_cache(maxsize=256)
def _uuid_text(value: uuid.UUID) -> str:
    """Return ``str(value)``: a run's rows repeat its id, and UUID.__str__ formats in Python."""
    return str(value)


# _json_value of the usual exact types, looked up without a call through its checks.
_TO_JSON: dict[type, Callable[[Any], Any]] = {
    dt.datetime: dt.datetime.isoformat, dt.date: dt.date.isoformat, uuid.UUID: _uuid_text}
