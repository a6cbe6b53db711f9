"""Per-tool limits across workers: the circuit breaker (open after N consecutive failures)."""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.db.models import F

from agentops import clock
from ledger.models import ToolAttempt, ToolCall, ToolLimit
from ledger.services.record import toolcall_move
from ledger.statuses import ToolCallStatus

_BREAKER_CATEGORIES = {"transient", "timeout", "rate_limited", "server_error"}


def limits_load() -> dict[str, ToolLimit]:
    """Return every tool's limit row by tool name (a small table, read once per tick)."""
    return {t.tool: t for t in ToolLimit.objects.all()}


def breaker_closes_at(limit: ToolLimit | None) -> dt.datetime | None:
    """Return when an open breaker lets a call through again (None when it is not open)."""
    if limit is None or limit.breaker_opened_at is None:
        return None
    until = limit.breaker_opened_at + dt.timedelta(seconds=limit.breaker_cooldown_s)
    return until if clock.now() < until else None


def breaker_open(limits: dict[str, ToolLimit], tool: str) -> bool:
    """Return True while ``tool``'s breaker is open (half-open once its cooldown passed)."""
    return breaker_closes_at(limits.get(tool)) is not None


def breaker_writes(limits: dict[str, ToolLimit],
                   results: list[tuple[str, bool, str]]) -> list[Callable[[], Any]]:
    """Return writers counting consecutive failures per tool and opening/closing breakers."""
    writes: list[Callable[[], Any]] = []
    for tool, ok, category in results:
        limit = limits.get(tool)
        if ok:
            if limit is not None and (limit.breaker_failures or limit.breaker_opened_at):
                limit.breaker_failures, limit.breaker_opened_at = 0, None
                writes.append(_reset(tool))
        elif category in _BREAKER_CATEGORIES:
            writes.append(_count_failure(tool, limits))
    return writes


def _reset(tool: str) -> Callable[[], Any]:
    return lambda: ToolLimit.objects.filter(tool=tool).update(
        breaker_failures=0, breaker_opened_at=None)


def _count_failure(tool: str, limits: dict[str, ToolLimit]) -> Callable[[], Any]:
    def write() -> None:
        limit, _ = ToolLimit.objects.get_or_create(tool=tool)
        ToolLimit.objects.filter(pk=limit.pk).update(breaker_failures=F("breaker_failures") + 1)
        limit.refresh_from_db()
        if limit.breaker_failures >= limit.breaker_threshold and limit.breaker_opened_at is None:
            limit.breaker_opened_at = clock.now()
            ToolLimit.objects.filter(pk=limit.pk).update(breaker_opened_at=limit.breaker_opened_at)
        limits[tool] = limit

    return write


def limit_values(limits: dict[str, ToolLimit], tool: str, spec: Any) -> tuple[int | None, int | None]:
    """Return (concurrency, calls per minute) for ``tool``: the admin row wins over the code."""
    row = limits.get(tool)
    concurrency = (row.concurrency if row is not None and row.concurrency else None) or getattr(
        spec, "concurrency", None)
    rate = (row.rate_per_minute if row is not None and row.rate_per_minute else None) or getattr(
        spec, "rate", None)
    return concurrency, rate


def limits_admit(*, calls: list[Any], caps: dict[str, tuple[int | None, int | None]]
                 ) -> dt.datetime | None:
    """Mark ``calls`` running if every tool has room across all workers; else return a retry time.

    One short transaction: the tools' limit rows are locked (in name order, so two workers
    never deadlock), in-flight calls and the last minute's attempts are counted, and the
    admitted calls are marked ``running`` before the lock is released. Nothing is marked when
    any tool is full: the caller waits a short timer and asks again (a queue, not a retry storm).
    """
    now = clock.now()
    wanted: dict[str, int] = {}
    for c in calls:
        wanted[c.tool] = wanted.get(c.tool, 0) + 1
    with transaction.atomic():
        for tool in sorted(wanted):
            ToolLimit.objects.get_or_create(tool=tool)
        list(ToolLimit.objects.select_for_update().filter(tool__in=sorted(wanted)).order_by("tool"))
        for tool, n in wanted.items():
            concurrency, rate = caps[tool]
            running = ToolCall.objects.filter(tool=tool, status=ToolCallStatus.RUNNING).count()
            if concurrency and running + n > concurrency:
                return now + dt.timedelta(seconds=0.5 + clock.rng().random())
            if rate:
                window = ToolAttempt.objects.filter(
                    tool_call__tool=tool, started_at__gte=now - dt.timedelta(seconds=60)
                ).exclude(status=ToolCallStatus.RUNNING)
                if window.count() + running + n > rate:
                    oldest = window.order_by("started_at").values_list("started_at", flat=True).first()
                    return (oldest or now) + dt.timedelta(seconds=60.05)
        for c in calls:
            toolcall_move(c, ToolCallStatus.RUNNING, updated_at=now)
        ToolCall.objects.filter(pk__in=[c.pk for c in calls]).update(
            status=ToolCallStatus.RUNNING, updated_at=now)
    return None
