"""Which teams a person administers, and the team a settings change is for.

Installation admins administer every team; a team admin (a membership with the ``admins``
role) only theirs. Budget policies, tool limits and notification rules are read and written
through these: a team admin never sees another team's rows (404 for a direct id).
"""
from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from agentops.errors import InvalidInput, NotFound
from runs.scope import scoped
from approvals.roles import ADMIN, can_admin, is_installation_admin, team_ids_for
from runs.models import Team
from runs.models.team import default_team_id


class TeamNotFound(NotFound):
    """No team by that slug, or none the caller administers."""

    code = "team_not_found"


def admin_teams(user: Any) -> QuerySet[Team]:
    """Return the teams ``user`` administers (every team for installation admins)."""
    return admin_scope(Team.objects.order_by("slug"), user, field="pk")


def admin_scope(qs: QuerySet, user: Any, *, field: str = "team_id") -> QuerySet:
    """Narrow ``qs`` to the rows of the teams ``user`` administers."""
    return scoped(qs, team_ids_for(user, ADMIN), field)


def admin_team_slugs(user: Any) -> list[str] | None:
    """Return the slugs of the teams ``user`` administers; None means every team."""
    if team_ids_for(user, ADMIN) is None:
        return None
    return list(admin_teams(user).values_list("slug", flat=True))


def admin_team_get(*, user: Any, slug: str | None) -> Team:
    """Return the team a settings change by ``user`` is for.

    ``slug`` names it; none given: the only team the user administers (an installation
    admin: the default team). Raises TeamNotFound for a team they do not administer and
    InvalidInput when they administer several and did not say which.
    """
    if slug:
        team = Team.objects.filter(slug=slug).first()
        if team is None or not can_admin(user, team):
            raise TeamNotFound(f"no team {slug!r} that you administer; yours: "
                               f"{_names(user)}", team=slug)
        return team
    if is_installation_admin(user):
        return Team.objects.get(pk=default_team_id())
    teams = list(admin_teams(user)[:2])
    if len(teams) == 1:
        return teams[0]
    raise InvalidInput(f"you administer several teams ({_names(user)}): say which with "
                       "team=<slug>", teams=_names(user))


def _names(user: Any) -> str:
    slugs = admin_team_slugs(user)
    return "every team" if slugs is None else (", ".join(slugs) or "none")

