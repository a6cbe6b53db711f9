"""Teams and their members: admins list their teams, installation admins create teams, and
whoever administers a team gives or takes its roles (each change audited)."""
from __future__ import annotations

from django.contrib import messages
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods

from agentops.errors import AgentOpsError
from approvals.errors import NotAllowed
from approvals.roles import TEAM_ROLES, can_admin, is_installation_admin
from approvals.team_members import team_create, team_get_managed, team_member_set, team_members
from approvals.teams import TeamNotFound, admin_teams
from runs.views._common import page, role_required


@require_http_methods(["GET", "POST"])
@role_required(can_admin)
def teams_page(request: HttpRequest) -> HttpResponse:
    """List the teams you administer; installation admins create one here."""
    status = 200
    if request.method == "POST":
        try:
            team = team_create(actor=request.user, slug=request.POST.get("slug", ""),
                               name=request.POST.get("name", ""))
        except (AgentOpsError, NotAllowed) as exc:
            messages.error(request, f"The team was not created: {exc}.")
            status = 422
        else:
            messages.success(request, f"Team {team.slug} created: add its people below.")
            return redirect("console:team", slug=team.slug)
    teams = admin_teams(request.user).annotate(members=Count("memberships"))
    return page(request, "teams/index.html", {
        "teams": teams, "may_create": is_installation_admin(request.user)}, status=status)


@require_http_methods(["GET", "POST"])
@role_required(can_admin)
def team_page(request: HttpRequest, slug: str) -> HttpResponse:
    """Show a team's members; add one, change a role or remove one (POST username, role)."""
    try:
        team = team_get_managed(actor=request.user, slug=slug)
    except TeamNotFound as exc:  # another team's page is no more there than a missing one
        raise Http404(exc.message) from None
    status = 200
    if request.method == "POST":
        username = request.POST.get("username", "").strip()
        role = request.POST.get("role", "") or None
        try:
            team_member_set(actor=request.user, team=team, username=username, role=role,
                            reason=request.POST.get("reason", "").strip())
        except (AgentOpsError, NotAllowed) as exc:
            messages.error(request, f"Nothing changed: {exc}.")
            status = 422
        else:
            messages.success(request, f"{username} is now {role} in {team.slug}." if role
                             else f"{username} was removed from {team.slug}.")
            return redirect("console:team", slug=team.slug)
    return page(request, "teams/detail.html", {
        "team": team, "members": team_members(team=team), "roles": TEAM_ROLES}, status=status)
