"""The caller's teams over the API (GET /api/teams) and the team a new run is started in.

Starting a run needs the operator role in its team (admins hold every role). A caller who
operates in one team only (and holds no installation-wide role) may leave ``team`` out; one
who operates in several must name it.
"""
from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Field, Router, Schema

from agentops import api_auth
from agentops.errors import InvalidInput
from approvals.errors import NotAllowed
from approvals.roles import OPERATOR, can_operate, installation_roles, team_ids_for, team_roles
from runs.models import Team
from runs.models.team import default_team_id

router = Router(tags=["teams"])


class TeamOut(Schema):
    """One team the caller sees, and the role held there."""

    slug: str
    name: str
    role: str = Field(description="the caller's role in this team (an installation-wide "
                                  "role counts in every team; the higher one is shown)")
    installation_wide: bool = Field(description="the role comes from an installation-wide "
                                                "group, not a membership of this team")


class TeamsOut(Schema):
    """The caller's teams and roles."""

    installation_roles: list[str]
    teams: list[TeamOut]


_RANK = {"viewers": 0, "support": 1, "operators": 2, "admins": 3}


def teams_of(user: Any) -> list[dict[str, Any]]:
    """Return the teams ``user`` sees with the (highest) role held in each, by slug."""
    wide = sorted(installation_roles(user), key=lambda r: _RANK.get(r, 0))
    own = team_roles(user)
    teams = Team.objects.all() if wide else Team.objects.filter(pk__in=own)
    rows = []
    for team in teams.order_by("slug")[:500]:
        member = own.get(team.pk, "")
        best = max([*wide[-1:], member] if member else wide[-1:],
                   key=lambda r: _RANK.get(r, 0))
        rows.append({"slug": team.slug, "name": team.name, "role": best,
                     "installation_wide": best != member})
    return rows


@router.get("", response=TeamsOut, summary="List your teams and roles")
def list_teams(request: HttpRequest) -> dict:
    """Return the teams you see and your role in each (installation-wide roles: every team)."""
    user = api_auth.viewer(request)
    return {"installation_roles": sorted(installation_roles(user)), "teams": teams_of(user)}


def team_for_start(user: Any, slug: str | None) -> Team:
    """Return the team a run of ``user`` starts in; raise NotAllowed or InvalidInput."""
    if slug:
        team = Team.objects.filter(slug=slug).first()
        if team is None or not can_operate(user, team):
            # An unknown team and a team you may not start runs in read the same.
            raise NotAllowed(f"you cannot start runs in team {slug!r}: it needs the operator "
                             "role in that team (GET /api/teams lists your teams and roles)")
        return team
    ids = team_ids_for(user, OPERATOR)
    if ids is None:
        return Team.objects.get(pk=default_team_id())
    if not ids:
        raise NotAllowed("starting a run needs the operator role in a team")
    if len(ids) == 1:
        return Team.objects.get(pk=next(iter(ids)))
    slugs = ", ".join(Team.objects.filter(pk__in=ids).order_by("slug")
                      .values_list("slug", flat=True))
    raise InvalidInput(f"you operate in several teams ({slugs}): say which one owns the run "
                       "with \"team\"", teams=slugs.split(", "))
