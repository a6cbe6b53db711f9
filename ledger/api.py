"""REST endpoints of the ledger: a tool call by id (optionally its full result); tool limits."""
from __future__ import annotations

from django.http import HttpRequest
from ninja import Path, Query, Router

from agentops import api_auth
from approvals import limits
from approvals.teams import admin_scope, admin_team_get
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
    if expand:
        api_auth.require(request, api_auth.can_see_results, "read full tool results")
    else:
        api_auth.viewer(request)
    call = sel.toolcall_get(tool_call_id=tool_call_id)
    if expand:
        call.result, call.result_content_type = sel.toolcall_result(call=call)
    return call


TEAM = Query(None, max_length=50, description=(
    "the team's slug; left out: the only team you administer (installation admins: the "
    "default team)"))


@admin_router.get("", response=list[ToolLimitOut], summary="List tool limits")
def list_tool_limits(request: HttpRequest, team: str | None = Query(
        None, max_length=50, description="only this team's (slug)")):
    """Return the limits per tool of the teams you administer (or of ``team``)."""
    user = api_auth.admin(request)
    rows = admin_scope(ToolLimit.objects.select_related("team"), user)
    if team:
        rows = rows.filter(team=admin_team_get(user=user, slug=team))
    return list(rows.order_by("tool", "team__slug")[:1000])


@admin_router.get("/{tool}", response=ToolLimitOut, summary="Get a tool's limits")
def get_tool_limit(request: HttpRequest, tool: str = Path(..., max_length=100, pattern=TOOL_NAME),
                   team: str | None = TEAM):
    """Return a team's limits of one tool."""
    user = api_auth.admin(request)
    owner = admin_team_get(user=user, slug=team)
    limit = ToolLimit.objects.filter(team=owner, tool=tool).select_related("team").first()
    if limit is None:
        raise ToolLimitNotFound(f"team {owner.slug} sets no limits for tool {tool}", tool=tool,
                                team=owner.slug)
    return limit


@admin_router.put("/{tool}", response=ToolLimitOut, summary="Set a tool's limits")
def set_tool_limit(request: HttpRequest, body: ToolLimitIn,
                   tool: str = Path(..., max_length=100, pattern=TOOL_NAME),
                   team: str | None = TEAM):
    """Create or change a team's limits of a tool; the change is written to the audit log."""
    user = api_auth.admin(request)
    owner = admin_team_get(user=user, slug=team)
    return limits.tool_limit_set(actor=user, team=owner, tool=tool,
                                 values=body.model_dump(exclude_unset=True))
