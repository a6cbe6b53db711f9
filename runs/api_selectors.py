"""Read-side queries of the REST API that the console's runs.selectors does not cover.

The run list is keyset-paginated on (created_at, id), newest first: a page costs the same
however deep it is, and new runs never shift the pages a client is walking.
"""
from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

from agentops.errors import AgentOpsError, NotFound
from ledger.models import ToolCall
from runs.errors import RunNotFound
from runs.event_archive import archived_events_restore
from runs.models import Event, Run, Signal, Snapshot, Step
from runs.models.event import run_events
from runs.scope import Teams, scoped
from runs.selectors import QueueFilters, run_filter


class BadCursor(AgentOpsError):
    """The cursor was not one this API handed out."""

    code = "bad_cursor"
    http_status = 400


class SnapshotNotFound(NotFound):
    """No snapshot of the run at that seq."""

    code = "snapshot_not_found"


@dataclass
class RunQuery:
    """The run list filters, as the API accepts them."""

    statuses: list[str]
    agent: str = ""
    team: str = ""
    reason: str = ""
    text: str = ""
    created_after: dt.datetime | None = None
    created_before: dt.datetime | None = None


def run_get(*, run_id: Any, teams: Teams) -> Run:
    """Return the run or raise RunNotFound (also for a run of a team outside ``teams``)."""
    run = scoped(Run.objects.select_related("team"), teams).filter(pk=run_id).first()
    if run is None:
        raise RunNotFound(f"no run {run_id}", run_id=str(run_id))
    return run


def run_query(*, query: RunQuery, teams: Teams) -> QuerySet[Run]:
    """Return the runs of ``teams`` matching ``query`` (unordered, unevaluated)."""
    qs = run_filter(tab="all", filters=QueueFilters(agent=query.agent, reason=query.reason,
                                                     q=query.text, team=query.team),
                    teams=teams)
    if query.statuses:
        qs = qs.filter(status__in=query.statuses)
    if query.created_after:
        qs = qs.filter(created_at__gte=query.created_after)
    if query.created_before:
        qs = qs.filter(created_at__lt=query.created_before)
    return qs


def _encode(run: Run) -> str:
    raw = json.dumps([run.created_at.isoformat(), str(run.pk)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: str) -> tuple[dt.datetime, uuid.UUID]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        stamp, pk = json.loads(raw)
        when = dt.datetime.fromisoformat(stamp)
        if when.tzinfo is None:
            raise ValueError("naive time")
        return when, uuid.UUID(pk)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise BadCursor("the cursor is not valid; start again without one") from None


def run_list_page(*, query: RunQuery, teams: Teams, cursor: str = "",
                  limit: int = 50) -> tuple[list[Run], str | None]:
    """Return one page of runs, newest first, and the next page's cursor (None at the end)."""
    qs = run_query(query=query, teams=teams).select_related("team")
    if cursor:
        stamp, pk = _decode(cursor)
        qs = qs.filter(Q(created_at__lt=stamp) | Q(created_at=stamp, pk__lt=pk))
    rows = list(qs.order_by("-created_at", "-id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (_encode(rows[-1]) if more and rows else None)


def step_list(*, run: Run) -> list[Step]:
    """Return the run's plan steps in order."""
    return list(Step.objects.filter(run=run).order_by("position")[:1000])


def event_list_after(*, run: Run, after_seq: int, limit: int) -> tuple[list[Event], bool]:
    """Return up to ``limit`` events after ``after_seq`` and whether more follow."""
    archived_events_restore(run.pk)
    rows = list(run_events(run).filter(seq__gt=after_seq).order_by("seq")[: limit + 1])
    return rows[:limit], len(rows) > limit


def toolcall_list(*, run: Run, offset: int, limit: int) -> list[ToolCall]:
    """Return a slice of the run's tool calls in the order the model made them."""
    return list(ToolCall.objects.filter(run=run).order_by("turn", "index", "id")
                [offset: offset + limit])


def snapshot_list(*, run: Run, limit: int) -> list[Snapshot]:
    """Return the newest snapshot headers of the run (without state)."""
    return list(Snapshot.objects.filter(run=run).defer("state").order_by("-seq")[:limit])


def snapshot_get(*, run: Run, seq: int) -> Snapshot:
    """Return the run's snapshot at ``seq`` with its state."""
    snap = Snapshot.objects.filter(run=run, seq=seq).first()
    if snap is None:
        raise SnapshotNotFound(f"run {run.pk} has no snapshot at seq {seq}", seq=seq)
    return snap


def signal_list(*, run: Run, limit: int) -> list[Signal]:
    """Return the run's signals, newest first."""
    return list(Signal.objects.filter(run=run).order_by("-received_at", "-id")[:limit])
