"""REST endpoints of a team's members: who holds which role in it, and changing that.

Installation admins manage every team; a team admin only theirs (another team is 404).
"""
from __future__ import annotations

from django.http import HttpRequest
from ninja import Field, Path, Router, Schema, Status

from agentops import api_auth
from agentops.strict import StrictIn
from approvals.roles import TEAM_ROLES
from approvals.team_members import team_get_managed, team_member_set, team_members

router = Router(tags=["teams"])

SLUG = Path(..., max_length=50, pattern=r"^[a-z0-9-]+$")
USERNAME = Path(..., max_length=150, pattern=r"^[\w.@+-]+$")


class MemberOut(Schema):
    """One person's role in the team (and the roles they hold in every team)."""

    username: str
    role: str
    installation_roles: list[str]


class MemberIn(StrictIn):
    """The role to give in the team."""

    role: str = Field(..., max_length=20, description=f"one of {', '.join(TEAM_ROLES)}")
    reason: str = Field("", max_length=2000)


@router.get("/{slug}/members", response=list[MemberOut], summary="List a team's members")
def list_members(request: HttpRequest, slug: str = SLUG):
    """Return the team's members by name (team admins: their own teams only)."""
    user = api_auth.admin(request)
    return team_members(team=team_get_managed(actor=user, slug=slug))


@router.put("/{slug}/members/{username}", response=list[MemberOut],
            summary="Give a person a role in a team")
def put_member(request: HttpRequest, body: MemberIn, slug: str = SLUG,
               username: str = USERNAME):
    """Set ``username``'s role in the team (added if new); audited; returns the members."""
    user = api_auth.admin(request)
    team = team_get_managed(actor=user, slug=slug)
    team_member_set(actor=user, team=team, username=username, role=body.role,
                    reason=body.reason)
    return team_members(team=team)


@router.delete("/{slug}/members/{username}", response={204: None},
               summary="Remove a person from a team")
def delete_member(request: HttpRequest, slug: str = SLUG, username: str = USERNAME):
    """Take ``username`` out of the team (their installation-wide roles stay); audited."""
    user = api_auth.admin(request)
    team_member_set(actor=user, team=team_get_managed(actor=user, slug=slug),
                    username=username, role=None)
    return Status(204, None)
