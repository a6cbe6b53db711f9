"""Declarative row writes: what a unit's commit writes besides its events and the Run row.

A writer is a callable (the engine's ``also`` list runs it inside the unit's transaction), but
these two also describe themselves — model, rows or filter, values — so the engine can fold a
whole unit into one SQL statement on PostgreSQL (``runs.engine.runtime.unit_sql``) instead of running
each through the ORM. Closures stay legal; a unit that holds one takes the ORM path.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError
from django.db.models import Model


@dataclass
class RowsInsert:
    """Insert ``rows`` of ``model``; ``on_duplicate`` turns a unique violation into a typed error."""

    model: type[Model]
    rows: list[Model]
    on_duplicate: Callable[[IntegrityError], Exception] | None = None

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
