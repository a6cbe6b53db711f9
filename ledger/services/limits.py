"""Per-tool limits across workers: the circuit breaker (open after N consecutive failures).

Limits belong to a team: a run reads its team's rows only. A breaker counts the failures
of its team's calls and opens for that team alone (another team's calls go on). A
concurrency or rate set on the team's row counts that team's calls; one set in the tool's
code (``@tool(concurrency=...)``) protects the service itself and counts every team's.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, NamedTuple

from django.db import transaction
from django.db.models import F

from agentops import clock
from ledger.models import ToolAttempt, ToolCall, ToolLimit
from ledger.services.record import toolcall_move
from ledger.statuses import ToolCallStatus

_BREAKER_CATEGORIES = {"transient", "timeout", "rate_limited", "server_error"}


def limits_load(*, team_id: int) -> dict[str, ToolLimit]:
    """Return the team's limit row of every tool by tool name (read once per tick)."""
    return {t.tool: t for t in ToolLimit.objects.filter(team_id=team_id)}


def limits_from_json(rows: list[dict[str, Any]]) -> dict[str, ToolLimit]:
    """Return ``limits_load``'s answer from the team's rows as PostgreSQL's ``row_to_json``
    writes them (read with another statement: runs.engine.runtime.claim_sql)."""
    fields = ToolLimit._meta.concrete_fields
    made = (ToolLimit.from_db("default", [f.attname for f in fields],
                              [f.to_python(row[f.column]) for f in fields]) for row in rows)
    return {t.tool: t for t in made}


def breaker_closes_at(limit: ToolLimit | None) -> dt.datetime | None:
    """Return when an open breaker lets a call through again (None when it is not open)."""
    if limit is None or limit.breaker_opened_at is None:
        return None
    until = limit.breaker_opened_at + dt.timedelta(seconds=limit.breaker_cooldown_s)
    return until if clock.now() < until else None


def breaker_open(limits: dict[str, ToolLimit], tool: str) -> bool:
    """Return True while ``tool``'s breaker is open (half-open once its cooldown passed)."""
    return breaker_closes_at(limits.get(tool)) is not None


def breaker_writes(limits: dict[str, ToolLimit], results: list[tuple[str, bool, str]], *,
                   team_id: int) -> list[Callable[[], Any]]:
    """Return writers counting the team's consecutive failures per tool and moving breakers."""
    writes: list[Callable[[], Any]] = []
    for tool, ok, category in results:
        limit = limits.get(tool)
        if ok:
            if limit is not None and (limit.breaker_failures or limit.breaker_opened_at):
                limit.breaker_failures, limit.breaker_opened_at = 0, None
                writes.append(_reset(tool, team_id))
        elif category in _BREAKER_CATEGORIES:
            writes.append(_count_failure(tool, team_id, limits))
    return writes


def _reset(tool: str, team_id: int) -> Callable[[], Any]:
    return lambda: ToolLimit.objects.filter(team_id=team_id, tool=tool).update(
        breaker_failures=0, breaker_opened_at=None)


def _count_failure(tool: str, team_id: int, limits: dict[str, ToolLimit]) -> Callable[[], Any]:
    def write() -> None:
        limit, _ = ToolLimit.objects.get_or_create(team_id=team_id, tool=tool)
        ToolLimit.objects.filter(pk=limit.pk).update(breaker_failures=F("breaker_failures") + 1)
        limit.refresh_from_db()
        if limit.breaker_failures >= limit.breaker_threshold and limit.breaker_opened_at is None:
            limit.breaker_opened_at = clock.now()
            ToolLimit.objects.filter(pk=limit.pk).update(breaker_opened_at=limit.breaker_opened_at)
        limits[tool] = limit

    return write


class Cap(NamedTuple):
    """A tool's concurrency and calls per minute, and whether each counts one team's calls."""

    concurrency: int | None
    rate: int | None
    concurrency_in_team: bool = False
    rate_in_team: bool = False

    def __bool__(self) -> bool:
        return bool(self.concurrency or self.rate)


def limit_values(limits: dict[str, ToolLimit], tool: str, spec: Any) -> Cap:
    """Return ``tool``'s cap: the team's row wins over the code (and counts the team's calls)."""
    row = limits.get(tool)
    concurrency = row.concurrency if row is not None and row.concurrency else None
    rate = row.rate_per_minute if row is not None and row.rate_per_minute else None
    return Cap(concurrency or getattr(spec, "concurrency", None),
               rate or getattr(spec, "rate", None), bool(concurrency), bool(rate))


def limits_admit(*, calls: list[Any], caps: dict[str, Cap], team_id: int) -> dt.datetime | None:
    """Mark ``calls`` running if every tool has room across all workers; else return a retry time.

    One short transaction: every team's limit rows of the tools are locked (by tool and
    team, so two workers never deadlock), in-flight calls and the last minute's attempts are
    counted (the team's, or everyone's for a cap from the code), and the admitted calls are
    marked ``running`` before the lock is released. Nothing is marked when any tool is full:
    the caller waits a short timer and asks again (a queue, not a retry storm).
    """
    now = clock.now()
    wanted: dict[str, int] = {}
    for c in calls:
        wanted[c.tool] = wanted.get(c.tool, 0) + 1
    for tool in sorted(wanted):  # committed first, so every worker's lock below sees it
        ToolLimit.objects.get_or_create(team_id=team_id, tool=tool)
    with transaction.atomic():
        list(ToolLimit.objects.select_for_update().filter(tool__in=sorted(wanted))
             .order_by("tool", "team_id"))
        for tool, n in wanted.items():
            retry_at = _full_until(tool, n, caps[tool], team_id, now)
            if retry_at is not None:
                return retry_at
        for c in calls:
            toolcall_move(c, ToolCallStatus.RUNNING, updated_at=now)
        ToolCall.objects.filter(pk__in=[c.pk for c in calls]).update(
            status=ToolCallStatus.RUNNING, updated_at=now)
    return None


def _full_until(tool: str, n: int, cap: Cap, team_id: int, now: dt.datetime
                ) -> dt.datetime | None:
    """Return when to ask again if ``n`` more calls of ``tool`` exceed its cap (else None)."""
    def running(in_team: bool) -> int:
        return _in_team(ToolCall.objects.filter(tool=tool, status=ToolCallStatus.RUNNING),
                        "run__team_id", in_team, team_id).count()

    if cap.concurrency and running(cap.concurrency_in_team) + n > cap.concurrency:
        return now + dt.timedelta(seconds=0.5 + clock.rng().random())
    if cap.rate:
        window = _in_team(ToolAttempt.objects.filter(
            tool_call__tool=tool, started_at__gte=now - dt.timedelta(seconds=60)
        ).exclude(status=ToolCallStatus.RUNNING), "tool_call__run__team_id", cap.rate_in_team,
            team_id)
        if window.count() + running(cap.rate_in_team) + n > cap.rate:
            oldest = window.order_by("started_at").values_list("started_at", flat=True).first()
            return (oldest or now) + dt.timedelta(seconds=60.05)
    return None


def _in_team(qs: Any, field: str, in_team: bool, team_id: int) -> Any:
    return qs.filter(**{field: team_id}) if in_team else qs
