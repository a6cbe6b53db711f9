"""Declarative row writes: what a unit's commit writes besides its events and the Run row.

A writer is a callable (the engine's ``also`` list runs it inside the unit's transaction), but
these two also describe themselves — model, rows or filter, values — so the engine can fold a
whole unit into one SQL statement on PostgreSQL (``runs.engine.runtime.unit_sql``) instead of running
each through the ORM. Closures stay legal; a unit that holds one takes the ORM path.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypeVar

from django.db import IntegrityError, router
from django.db.models import ForeignObjectRel, Model
from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import (ForeignKeyDeferredAttribute,
                                                         ForwardManyToOneDescriptor)
from django.db.models.query_utils import DeferredAttribute
from django.db.models.signals import post_init, pre_init

M = TypeVar("M", bound=Model)


@dataclass
class RowsInsert:
    """Insert ``rows`` of ``model``; ``on_duplicate`` turns a unique violation into a typed error.

    ``json_texts`` (one dict per row, or None): JSON text already made of some of a row's JSON
    column values (column -> text of that very value, checked by ``check_json``): a unit's one
    statement (runs.engine.runtime.unit_rows) pastes it instead of encoding the value again.
    """

    model: type[Model]
    rows: list[Model]
    on_duplicate: Callable[[IntegrityError], Exception] | None = None
    json_texts: list[dict[str, str]] | None = None

    def __call__(self) -> None:
        if not self.rows:
            return
        try:
            self.model.objects.bulk_create(self.rows)
        except IntegrityError as exc:
            if self.on_duplicate is None:
                raise
            raise self.on_duplicate(exc) from exc


@dataclass
class RowsUpdate:
    """Set ``values`` on the rows of ``model`` matching ``where`` (field name -> value, all equal)."""

    model: type[Model]
    where: dict[str, Any]
    values: dict[str, Any] = field(default_factory=dict)

    def __call__(self) -> int:
        return self.model.objects.filter(**self.where).update(**self.values)


def row_new(model: type[M], **values: Any) -> M:
    """Return ``model(**values)``, built without ``Model.__init__``'s walk over every field.

    The engine makes a ledger row and two attempt rows per tool call; ``__init__`` pops each
    of a ToolCall's 32 fields from its keywords (a KeyError for each one left out) and asks
    each for its default. Here the defaults that are values are copied in one go, in field
    order, and the given values set over them: the instance is the same (its ``__dict__``
    and ``_state``). A related row given by name is set as its descriptor sets it (type
    check, database routing, cache: ``_relate``). Anything else (a property, a field with
    its own descriptor, a pre_init or post_init receiver) takes ``__init__`` itself.
    """
    shape = _shape(model)
    if shape is None or pre_init.receivers or post_init.receivers:
        return model(**values)
    blank, called, related = shape
    obj = model.__new__(model)
    obj._state = ModelState()
    state = obj.__dict__
    state.update(blank)
    for attname, default in called:
        if attname not in values:
            state[attname] = default()
    for name, value in values.items():
        if name in blank:
            state[name] = value
        elif name in related:
            _relate(obj, name, related[name], value)
        else:
            return model(**values)
    return obj


def _relate(obj: Model, name: str, fk: tuple | None, value: Any) -> None:
    """Set the related row ``value`` on the new row ``obj`` as ForwardManyToOneDescriptor's
    ``__set__`` does (its type, both rows' database by the router, the relation allowed, the
    key column, the cache), without its generic steps: ``obj`` is new, so no related row is
    cached on it yet (a row per tool call and per attempt, each step). ``fk``: ``_fk``'s."""
    if fk is None or not isinstance(value, fk[0]):  # None, a wrong type, a composite key
        setattr(obj, name, value)
        return
    _, attname, target_attname, cache_name = fk
    if obj._state.db is None:
        obj._state.db = router.db_for_write(type(obj), instance=value)
    if value._state.db is None:
        value._state.db = router.db_for_write(type(value), instance=obj)
    if not router.allow_relation(value, obj):
        raise ValueError(f'Cannot assign "{value!r}": the current database router prevents '
                         "this relation.")
    obj.__dict__[attname] = getattr(value, target_attname)
    obj._state.fields_cache[cache_name] = value


def _fk(model: type[Model], f: Any) -> tuple | None:
    """Return (related model, key attname, related key attname, cache name) of a plain
    one-column foreign key ``_relate`` may set itself, else None (its descriptor sets it)."""
    if type(model.__dict__.get(f.name)) is not ForwardManyToOneDescriptor:
        return None
    pairs = f.related_fields
    if len(pairs) != 1:
        return None
    return (f.remote_field.model._meta.concrete_model, pairs[0][0].attname, pairs[0][1].attname,
            f.cache_name)


@cache
def _shape(model: type[Model]) -> tuple[dict[str, Any], tuple, dict[str, Any]] | None:
    """Return (each field's default as a value, by attname, in field order; the callable
    defaults; the related fields by name, with ``_fk``'s), or None when ``row_new`` must use
    ``__init__``."""
    blank: dict[str, Any] = {}
    called, related = [], {}
    for f in model._meta.fields:
        if f.column is None or f.generated:
            continue
        if type(model.__dict__.get(f.attname)) not in (DeferredAttribute,
                                                       ForeignKeyDeferredAttribute):
            return None
        if f.has_default() and callable(f.default):
            called.append((f.attname, f._get_default))
            blank[f.attname] = None  # its place in field order; set per instance
        else:
            blank[f.attname] = f._get_default()  # the very value get_default() returns
        if isinstance(f.remote_field, ForeignObjectRel):
            related[f.name] = _fk(model, f)
    return blank, tuple(called), related
