"""Per-tool limits across workers: the circuit breaker (open after N consecutive failures)."""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from django.db.models import F

from agentops import clock
from ledger.models import ToolLimit

_BREAKER_CATEGORIES = {"transient", "timeout", "rate_limited", "server_error"}


def limits_load() -> dict[str, ToolLimit]:
    """Return every tool's limit row by tool name (a small table, read once per tick)."""
    return {t.tool: t for t in ToolLimit.objects.all()}


def breaker_open(limits: dict[str, ToolLimit], tool: str) -> bool:
    """Return True while ``tool``'s breaker is open (half-open once its cooldown passed)."""
    limit = limits.get(tool)
    if limit is None or limit.breaker_opened_at is None:
        return False
    return clock.now() < limit.breaker_opened_at + dt.timedelta(seconds=limit.breaker_cooldown_s)


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
