"""Ledger writes: tool-call rows recorded before execution, outcomes recorded after.

Every function here returns a callable to run inside the unit's transaction (the engine
commits ledger rows together with the events that mention them).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import IntegrityError

from agentops import clock
from ledger.errors import DuplicateToolCall, IllegalToolCallTransition
from ledger.models import ToolAttempt, ToolCall
from ledger.statuses import toolcall_can_move


def toolcalls_insert(rows: list[ToolCall]) -> Callable[[], None]:
    """Return a writer inserting new ledger rows; a reused key raises DuplicateToolCall."""

    def write() -> None:
        try:
            ToolCall.objects.bulk_create(rows)
        except IntegrityError as exc:
            raise DuplicateToolCall(
                "a tool call with this idempotency key or id is already recorded",
                tool_call_ids=[r.tool_call_id for r in rows],
            ) from exc

    return write


def toolcall_update(call: ToolCall, to: str, **fields: Any) -> Callable[[], None]:
    """Return a writer moving ``call`` to status ``to`` (checked) with ``fields``."""
    if to != call.status and not toolcall_can_move(call.status, to):
        raise IllegalToolCallTransition(
            f"tool call {call.tool_call_id} cannot move from {call.status} to {to}",
            src=call.status, dst=to,
        )
    values = {"status": to, "updated_at": clock.now(), **fields}
    for name, value in values.items():
        setattr(call, name, value)

    def write() -> None:
        ToolCall.objects.filter(pk=call.pk).update(**values)

    return write


def attempts_insert(rows: list[ToolAttempt]) -> Callable[[], None]:
    """Return a writer inserting attempt rows (unique per call and attempt number)."""

    def write() -> None:
        if rows:
            ToolAttempt.objects.bulk_create(rows)

    return write


def attempt_finish(call: ToolCall, attempt: int, status: str, **fields: Any) -> Callable[[], None]:
    """Return a writer closing an attempt that was opened before dispatch."""

    def write() -> None:
        now = clock.now()
        ToolAttempt.objects.filter(tool_call_id=call.pk, attempt=attempt).update(
            status=status, finished_at=now, **fields
        )

    return write
