"""Read side of the list pages: a user's saved views and a run's full, searchable history."""
from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models import Q, TextField
from django.db.models.functions import Cast

from approvals.roles import team_ids_for
from runs.errors import RunNotFound
from runs.models import Event, Run, SavedView
from runs.models.event import run_events
from runs.scope import Teams, scoped
from runs.selectors import PAGE_SIZE, Page


def run_get(*, run_id: Any, teams: Teams) -> Run:
    """Return the run ``run_id`` alone (no steps, no ledger); RunNotFound when there is none
    or it belongs to a team outside ``teams``."""
    run = scoped(Run.objects.all(), teams).filter(pk=run_id).first()
    if run is None:
        raise RunNotFound(f"no run {run_id}", run_id=str(run_id))
    return run


def saved_view_list(*, user: Any) -> list[SavedView]:
    """Return ``user``'s saved views by name; a view of a team they have left is hidden."""
    views = SavedView.objects.filter(user=user).select_related("team")
    ids = team_ids_for(user)
    if ids is not None:
        views = views.filter(Q(team__isnull=True) | Q(team_id__in=ids))
    return list(views.order_by("name")[:100])


AGENT_NAMES = 200  # the agent filter's options, at most
# A loose index scan: the first name, then each next one by one probe of an index led by
# agent_name (run_agent_updated, or run_team_agent within a team). SELECT DISTINCT would
# read every run: PostgreSQL has no skip scan.
_NAMES_SQL = ("WITH RECURSIVE names(name) AS ("
              "(SELECT agent_name FROM runs_run WHERE {scope} ORDER BY agent_name LIMIT 1) "
              "UNION ALL SELECT (SELECT agent_name FROM runs_run WHERE {scope} "
              "AND agent_name > names.name ORDER BY agent_name LIMIT 1) FROM names "
              "WHERE names.name IS NOT NULL) SELECT name FROM names WHERE name IS NOT NULL "
              "LIMIT %s")


def run_agent_names(*, teams: Teams) -> list[str]:
    """Return the agent names that have runs in ``teams`` (for the filter menu).

    On PostgreSQL a few index probes per name (and per team), whatever the number of runs.
    """
    if connection.vendor != "postgresql":
        return list(scoped(Run.objects.all(), teams).order_by("agent_name")
                    .values_list("agent_name", flat=True).distinct()[:AGENT_NAMES])
    names: set[str] = set()
    with connection.cursor() as cursor:
        for team in [None] if teams is None else sorted(teams):
            scope, args = ("TRUE", []) if team is None else ("team_id = %s", [team])
            cursor.execute(_NAMES_SQL.format(scope=scope), [*args, *args, AGENT_NAMES])
            names.update(row[0] for row in cursor.fetchall())
    return sorted(names)[:AGENT_NAMES]


def event_history(*, run: Run, type: str = "", text: str = "", after_seq: int | None = None,
                  newest_first: bool = False, limit: int = PAGE_SIZE) -> Page:
    """Return one keyset page (by seq) of every event of a run, filtered by type and text.

    ``text`` matches the stored payload (as JSON text, already redacted), the tool call id
    or the actor, case-insensitively; the scan stays inside the one run's events.
    """
    qs = run_events(run)
    if type:
        qs = qs.filter(type=type)
    if text:
        qs = qs.annotate(data_text=Cast("data", TextField())).filter(
            Q(data_text__icontains=text) | Q(tool_call_id__icontains=text)
            | Q(actor__icontains=text))
    if after_seq is not None:
        qs = qs.filter(seq__lt=after_seq) if newest_first else qs.filter(seq__gt=after_seq)
    rows = list(qs.order_by("-seq" if newest_first else "seq")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    for row in rows:
        row.raw = _raw(row)
    return Page(rows=rows, next_cursor=str(rows[-1].seq) if more and rows else None)


def _raw(event: Event) -> dict[str, Any]:
    """Return the event as stored, every column, for the raw JSON view."""
    return {"seq": event.seq, "type": event.type, "at": event.at.isoformat(),
            "actor": event.actor, "tool_call_id": event.tool_call_id, "attempt": event.attempt,
            "key": event.key, "schema_version": event.schema_version, "data": event.data}
