"""REST endpoints of the ledger: a tool call by id (optionally its full result); tool limits."""
from __future__ import annotations

from django.http import HttpRequest
from ninja import Path, Router

from agentops import api_auth
from approvals.roles import can_see_results
from runs.scope import visible_teams
from approvals import limits
from ledger import api_selectors as sel
from ledger.models import ToolLimit
from ledger.schemas import ToolCallDetailOut, ToolLimitIn, ToolLimitOut

router = Router(tags=["tool calls"])
admin_router = Router(tags=["admin"])

TOOL_NAME = r"^[A-Za-z0-9_.:-]+$"


class ToolLimitNotFound(limits.NotFound):
    """No limits are set for that tool."""

    code = "tool_limit_not_found"


@router.get("/{tool_call_id}", response=ToolCallDetailOut, summary="Get a tool call")
def get_tool_call(request: HttpRequest, tool_call_id: str = Path(..., max_length=40),
                  expand: bool = False):
    """Return a tool call; ``expand=true`` adds the full result (operators, support, admins)."""
    user = api_auth.viewer(request)
    call = sel.toolcall_get(tool_call_id=tool_call_id, teams=visible_teams(user))
    if expand:
        api_auth.require(request, lambda u: can_see_results(u, call.run.team_id),
                         "read full tool results")
        call.result, call.result_content_type = sel.toolcall_result(call=call)
    return call


@admin_router.get("", response=list[ToolLimitOut], summary="List tool limits")
def list_tool_limits(request: HttpRequest):
    """Return the limits set per tool."""
    api_auth.admin(request)
    return list(ToolLimit.objects.order_by("tool")[:1000])


@admin_router.get("/{tool}", response=ToolLimitOut, summary="Get a tool's limits")
def get_tool_limit(request: HttpRequest, tool: str = Path(..., max_length=100, pattern=TOOL_NAME)):
    """Return the limits of one tool."""
    api_auth.admin(request)
    limit = ToolLimit.objects.filter(tool=tool).first()
    if limit is None:
        raise ToolLimitNotFound(f"no limits are set for tool {tool}", tool=tool)
    return limit


@admin_router.put("/{tool}", response=ToolLimitOut, summary="Set a tool's limits")
def set_tool_limit(request: HttpRequest, body: ToolLimitIn,
                   tool: str = Path(..., max_length=100, pattern=TOOL_NAME)):
    """Create or change a tool's limits; the change is written to the audit log."""
    user = api_auth.admin(request)
    return limits.tool_limit_set(actor=user, tool=tool, values=body.model_dump(exclude_unset=True))
