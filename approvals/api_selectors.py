"""Read-side queries of the REST API for approvals (keyset pages, newest first)."""
from __future__ import annotations

import uuid
from typing import Any

from agentops.errors import NotFound
from approvals.models import Approval
from runs.api_selectors import BadCursor
from runs.scope import Teams, scoped


class ApprovalNotFound(NotFound):
    """No approval with that id."""

    code = "approval_not_found"


def approval_get(*, approval_id: int, teams: Teams) -> Approval:
    """Return the approval or raise ApprovalNotFound (also for one of a team outside ``teams``)."""
    row = (scoped(Approval.objects.select_related("tool_call", "decided_by", "run"), teams,
                  "run__team_id").filter(pk=approval_id).first())
    if row is None:
        raise ApprovalNotFound(f"no approval {approval_id}", approval_id=approval_id)
    return row


def approval_list_page(*, teams: Teams, status: str = "", run_id: uuid.UUID | None = None,
                       tool: str = "", cursor: str = "",
                       limit: int = 50) -> tuple[list[Approval], str | None]:
    """Return one page of approvals of runs of ``teams``, newest first, and the next cursor."""
    qs = scoped(Approval.objects.select_related("tool_call", "decided_by"), teams,
                "run__team_id")
    if status:
        qs = qs.filter(status=status)
    if run_id:
        qs = qs.filter(run_id=run_id)
    if tool:
        qs = qs.filter(tool=tool)
    if cursor:
        qs = qs.filter(pk__lt=_decode(cursor))
    rows: list[Any] = list(qs.order_by("-id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (str(rows[-1].pk) if more and rows else None)


def _decode(cursor: str) -> int:
    if not cursor.isdigit() or len(cursor) > 18:
        raise BadCursor("the cursor is not valid; start again without one")
    return int(cursor)
