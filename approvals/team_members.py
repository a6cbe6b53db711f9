"""Teams and who is in them: create a team, list its people, give or take a role in it.

Installation admins manage every team and alone create teams; a team admin manages the
members of their own teams. Memberships only ever grant a role in one team: installation-wide
roles (Django groups) are not given here. Every change goes through ``membership_set``
(approvals.users), which writes the audit row.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from agentops.errors import Conflict, InvalidInput, NotFound
from approvals.audit import audit_record
from approvals.errors import NotAllowed
from approvals.models import Membership
from approvals.roles import ALL_ROLES, can_admin, installation_roles, is_installation_admin
from approvals.teams import TeamNotFound
from approvals.users import membership_set
from runs.models import Team

_SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,48}[a-z0-9])?$")


class TeamExists(Conflict):
    """A team with that slug exists already."""

    code = "team_exists"


class UnknownUser(NotFound):
    """No user by that name."""

    code = "user_not_found"


@dataclass(frozen=True)
class Member:
    """One person's role in a team, and the roles they hold in every team."""

    username: str
    role: str
    installation_roles: tuple[str, ...]


def team_create(*, actor: Any, slug: str, name: str = "", from_shell: bool = False) -> Team:
    """Create team ``slug`` and audit it as ``team.create``.

    Only installation admins create teams, or whoever runs ``manage.py`` (``from_shell``).
    """
    if not from_shell and not is_installation_admin(actor):
        raise NotAllowed("only the installation's admins create teams")
    slug = (slug or "").strip()
    if not _SLUG.match(slug):
        raise InvalidInput(f"a team's slug is 1-50 lowercase letters, digits and dashes, "
                           f"not starting or ending with a dash (got {slug!r})", slug=slug)
    try:
        with transaction.atomic():
            team = Team.objects.create(slug=slug, name=(name or "").strip()[:100] or slug)
            audit_record(actor=actor, action="team.create",
                         data={"team": slug, "name": team.name})
    except IntegrityError:
        raise TeamExists(f"team {slug!r} exists already", slug=slug) from None
    return team


def team_get_managed(*, actor: Any, slug: str) -> Team:
    """Return team ``slug`` if ``actor`` manages its members; else TeamNotFound (404)."""
    team = Team.objects.filter(slug=slug).first()
    if team is None or not can_admin(actor, team):
        raise TeamNotFound(f"no team {slug!r} whose members you manage", team=slug)
    return team


def team_members(*, team: Team) -> list[Member]:
    """Return the members of ``team`` by name, with their installation-wide roles."""
    rows = Membership.objects.filter(team=team).select_related("user").order_by(
        "user__username")
    return [Member(m.user.get_username(), m.role, tuple(sorted(installation_roles(m.user))))
            for m in rows]


def team_member_set(*, actor: Any, team: Team, username: str, role: str | None,
                    reason: str = "") -> None:
    """Give ``username`` ``role`` in ``team`` (None: remove them); audited by membership_set.

    A team admin holds the team's highest role, so they may give any team role, never one
    across the installation. Raises UnknownUser for a name nobody has, InvalidInput for a
    role that is not a team role, NotAllowed when ``actor`` does not manage the team.
    """
    if not can_admin(actor, team):
        raise NotAllowed(f"you do not manage the members of team {team.slug}")
    if role is not None and role not in ALL_ROLES:
        raise InvalidInput(f"role must be one of {', '.join(ALL_ROLES)} (got {role!r})",
                           role=role)
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise UnknownUser(f"no user {username!r}; create them first (manage.py agentops "
                          "createuser, or single sign-on)", username=username)
    membership_set(user=user, team=team, role=role, actor=actor, reason=reason)


def team_user_add(*, username: str, team_slug: str, role: str, email: str = "",
                  existing: bool = False, actor: Any = "cli") -> tuple[Any, bool]:
    """Create ``username`` (no usable password) with ``role`` in team ``team_slug`` only.

    With ``existing`` an existing user gets the membership instead of an error. Returns
    (user, created). Raises TeamNotFound naming the teams that exist.
    """
    team = Team.objects.filter(slug=team_slug).first()
    if team is None:
        known = ", ".join(Team.objects.values_list("slug", flat=True)[:50]) or "none"
        raise TeamNotFound(f"no team {team_slug!r} (teams: {known}); create it with "
                           "`manage.py agentops createteam SLUG`", team=team_slug)
    if role not in ALL_ROLES:
        raise InvalidInput(f"role must be one of {', '.join(ALL_ROLES)} (got {role!r})",
                           role=role)
    model = get_user_model()
    with transaction.atomic():
        user = model.objects.filter(username=username).first()
        if user is not None and not existing:
            raise Conflict(f"user {username!r} already exists; pass --existing to give them "
                           f"a role in {team_slug}", username=username)
        created = user is None
        if created:
            if not username.strip():
                raise InvalidInput("the username must not be empty")
            user = model.objects.create_user(username=username, email=email)
        membership_set(user=user, team=team, role=role, actor=actor)
    return user, created
