"""Ledger writes: tool-call rows recorded before execution, outcomes recorded after.

Every function here returns a callable to run inside the unit's transaction (the engine
commits ledger rows together with the events that mention them). ``toolcall_move`` is the
one place a ToolCall's status changes: every writer (these, the engine's in-memory rows not
inserted yet, the concurrency limiter's bulk claim) checks ``TOOLCALL_TRANSITIONS`` through
it, in Python, before any SQL is built.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from functools import cache
from typing import Any

from django.db import IntegrityError
from django.db.models import Model
from django.db.models.query_utils import DeferredAttribute

from agentops import clock
from agentops.writes import RowsInsert, RowsUpdate
from ledger.errors import DuplicateToolCall, IllegalToolCallTransition
from ledger.models import ToolAttempt, ToolCall
from ledger.statuses import toolcall_can_move


def toolcalls_insert(rows: list[ToolCall]) -> RowsInsert:
    """Return a writer inserting new ledger rows; a reused key raises DuplicateToolCall."""

    def duplicate(exc: IntegrityError) -> DuplicateToolCall:
        return DuplicateToolCall(
            "a tool call with this idempotency key or id is already recorded",
            tool_call_ids=[r.tool_call_id for r in rows],
        )

    return RowsInsert(ToolCall, rows, on_duplicate=duplicate)


def toolcall_move(call: ToolCall, to: str, *, at: dt.datetime | None = None,
                  **fields: Any) -> dict[str, Any]:
    """Check ``call`` may move to ``to``, set it (and ``fields``) on the instance; return them.

    ``at``: the time of the move (``updated_at``) when the caller has just read the clock,
    else now. Raises IllegalToolCallTransition (409) when the transition table does not
    allow it.
    """
    if to != call.status and not toolcall_can_move(call.status, to):
        raise IllegalToolCallTransition(
            f"tool call {call.tool_call_id} cannot move from {call.status} to {to}",
            src=call.status, dst=to,
        )
    values = {"status": to, "updated_at": at or clock.now(), **fields}
    row_fields_set(call, values)
    return values


def row_fields_set(row: Model, values: dict[str, Any]) -> None:
    """Set ``values`` (attname -> value) on ``row`` as ``setattr`` does for each.

    Fields whose class attribute is a plain DeferredAttribute (no ``__set__``): ``setattr``
    stores them in the instance's ``__dict__``, so one ``update`` does it (a settled call
    sets a dozen, twice a step). Any other name takes ``setattr`` itself.
    """
    if _plain_fields(type(row)).issuperset(values):
        row.__dict__.update(values)
        return
    for name, value in values.items():
        setattr(row, name, value)


@cache
def _plain_fields(model: type[Model]) -> frozenset[str]:
    return frozenset(f.attname for f in model._meta.concrete_fields
                     if type(model.__dict__.get(f.attname)) is DeferredAttribute)


def toolcall_update(call: ToolCall, to: str, **fields: Any) -> Callable[[], Any]:
    """Return a writer moving ``call`` to status ``to`` (checked) with ``fields``."""
    values = toolcall_move(call, to, **fields)
    if call.pk is not None:
        return RowsUpdate(ToolCall, {"pk": call.pk}, values)
    # Inserted by a unit not read yet (still in flight, or this same unit): its id is not
    # known here, so the row is named by its own unique ``tool_call_id``.
    return RowsUpdate(ToolCall, {"tool_call_id": call.tool_call_id}, values)


def attempts_insert(rows: list[ToolAttempt]) -> RowsInsert:
    """Return a writer inserting attempt rows (unique per call and attempt number)."""
    return RowsInsert(ToolAttempt, rows)


def attempt_finish(call: ToolCall, attempt: int, status: str, **fields: Any) -> RowsUpdate:
    """Return a writer closing an attempt that was opened before dispatch (finished now,
    unless ``fields`` say when).

    A call whose row id is not known yet (inserted by a unit still in flight) is named by its
    ``tool_call_id`` (``tool_call__tool_call_id``: the unit's one statement looks its id up).
    """
    where: dict[str, Any] = ({"tool_call_id": call.pk} if call.pk is not None
                             else {"tool_call__tool_call_id": call.tool_call_id})
    return RowsUpdate(ToolAttempt, {**where, "attempt": attempt},
                      {"status": status, "finished_at": clock.now(), **fields})
