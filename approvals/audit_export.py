"""Reading the audit trail out: pages by cursor, as JSON lines or CSV (docs/audit.md).

The cursor is the rows' ``seq`` (approvals.audit.audit_sequence): rows come oldest first,
and a reader that resumes after the last cursor it saw gets every later row exactly once,
even while rows are being written.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from approvals.audit import audit_sequence
from runs.scope import scoped
from approvals.models import Intervention

CSV_COLUMNS = ("cursor", "id", "at", "actor", "actor_id", "action", "team", "run_id",
               "reason", "data")
# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class ExportQuery:
    """What to export: after which cursor, how many, and the optional filters.

    ``team_ids`` is the caller's scope (None: every team, installation-wide rows included).
    """

    after: int = 0
    limit: int = 1000
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    action: str = ""
    team_ids: frozenset[int] | None = None


@dataclass(frozen=True)
class ExportPage:
    """The rows of one page (a lazy queryset) and the cursor to resume after."""

    rows: QuerySet[Intervention]
    next_cursor: int
    more: bool


def audit_export_page(*, q: ExportQuery) -> ExportPage:
    """Return the page of audit rows after ``q.after``, oldest first, and the next cursor.

    When the page is not full the next cursor is the highest number given so far: the rows
    up to it that the filters left out can never match later (audit rows do not change).
    """
    head = audit_sequence()
    qs = _filtered(q).filter(seq__gt=q.after, seq__lte=head).order_by("seq")
    last = list(qs.values_list("seq", flat=True)[q.limit - 1:q.limit])
    if last:
        return ExportPage(rows=qs.filter(seq__lte=last[0]), next_cursor=last[0],
                          more=last[0] < head)
    return ExportPage(rows=qs, next_cursor=max(head, q.after), more=False)


def _filtered(q: ExportQuery) -> QuerySet[Intervention]:
    qs = scoped(Intervention.objects.select_related("team"), q.team_ids)
    if q.since:
        qs = qs.filter(at__gte=q.since)
    if q.until:
        qs = qs.filter(at__lt=q.until)
    if q.action:
        qs = qs.filter(action__startswith=q.action)
    return qs


def audit_row(i: Intervention) -> dict[str, Any]:
    """Return one audit row as the export and the sink send it."""
    return {"cursor": i.seq, "id": i.pk, "at": i.at.astimezone(dt.UTC).isoformat(),
            "actor": i.actor_name, "actor_id": i.actor_id, "action": i.action,
            "team": i.team.slug if i.team_id else None,
            "run_id": str(i.run_id) if i.run_id else None, "reason": i.reason,
            "data": i.data}


def jsonl_lines(rows: Iterable[Intervention]) -> Iterator[str]:
    """Yield one JSON document per line (each carries its own cursor)."""
    for i in rows:
        yield json.dumps(audit_row(i), sort_keys=True, default=str) + "\n"


def csv_lines(rows: Iterable[Intervention]) -> Iterator[str]:
    """Yield a header row, then one CSV record per audit row, formula-safe."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\r\n")
    out.writerow(CSV_COLUMNS)
    for i in rows:
        row = audit_row(i)
        row["data"] = json.dumps(row["data"], sort_keys=True, default=str)
        out.writerow([formula_safe(row[c]) for c in CSV_COLUMNS])
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
    yield buf.getvalue()


def formula_safe(value: Any) -> str:
    """Return the cell text, quoted with a leading ' when a spreadsheet would run it."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text
