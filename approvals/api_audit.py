"""The audit export endpoint: the trail as JSON lines or CSV, oldest first, by cursor."""
from __future__ import annotations

from typing import Literal

from django.http import HttpRequest, StreamingHttpResponse
from ninja import Query, Router

from agentops import api_auth
from agentops.errors import InvalidInput
from agentops.strict import Instant
from approvals import roles
from approvals.audit_export import ExportQuery, audit_export_page, csv_lines, jsonl_lines
from runs.models import Team

router = Router(tags=["audit"])

NEXT_HEADER = "X-Next-Cursor"
MORE_HEADER = "X-More"


class BadExportQuery(InvalidInput):
    """An export filter does not make sense; the message says which."""

    code = "invalid_export_query"


@router.get("/export", summary="Export the audit trail", response={200: None},
            openapi_extra={"responses": {200: {"description": (
                "JSON lines (one row per line, each with its `cursor`) or CSV with a header "
                "row; the `X-Next-Cursor` header is the `after` of the next call"),
                "content": {"application/x-ndjson": {}, "text/csv": {}}}}})
def export(request: HttpRequest, format: Literal["jsonl", "csv"] = "jsonl",
           after: int = Query(0, ge=0, le=2**62), limit: int = Query(1000, ge=1, le=10000),
           since: Instant | None = None, until: Instant | None = None,
           action: str = Query("", max_length=60), team: str = Query("", max_length=100)):
    """Stream audit rows after the cursor ``after``, oldest first, at most ``limit``.

    Installation admins read every row; a team admin reads the rows of their teams' runs
    and of their teams' settings. Resume with the ``X-Next-Cursor`` header (or, in JSON
    lines, the last row's ``cursor``): no row is missed or repeated, even while rows are
    being written.
    """
    user = api_auth.require(request, roles.can_admin, "export the audit trail")
    if since and until and since >= until:
        raise BadExportQuery("since must be before until")
    q = ExportQuery(after=after, limit=limit, since=since, until=until, action=action.strip(),
                    team_ids=_scope(user, team.strip()))
    page = audit_export_page(q=q)
    rows = page.rows.iterator(chunk_size=500)
    if format == "csv":
        response = StreamingHttpResponse(csv_lines(rows), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="audit-after-{after}.csv"'
    else:
        response = StreamingHttpResponse(jsonl_lines(rows), content_type="application/x-ndjson")
    response[NEXT_HEADER] = str(page.next_cursor)
    response[MORE_HEADER] = "true" if page.more else "false"
    return response


def _scope(user: object, slug: str) -> frozenset[int] | None:
    """Return the team ids the caller may export (None: all), narrowed to ``slug`` if given."""
    ids = roles.team_ids_for(user, roles.ADMIN)
    if not slug:
        return ids
    found = Team.objects.filter(slug=slug).values_list("pk", flat=True).first()
    if found is None:
        raise BadExportQuery(f"no team {slug!r}")
    if ids is not None and found not in ids:
        raise api_auth.RoleRequired(f"export the audit trail of team {slug}")
    return frozenset({found})
