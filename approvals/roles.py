"""Roles, and the teams they hold in: the only place that knows role names.

A role held through a Django group of the same name is installation-wide (that role in every
team); the ``admins`` group and superusers are the installation's admins. A ``Membership``
(approvals.models) gives a role in one team only. Every predicate takes ``team`` (a Team or
its id): with it, the answer is for that team; without it, "in some team" (may this person
see the page at all), except ``is_installation_admin``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

VIEWER = "viewers"
OPERATOR = "operators"
SUPPORT = "support"
ADMIN = "admins"
ALL_ROLES = (VIEWER, OPERATOR, SUPPORT, ADMIN)
TEAM_ROLES = ALL_ROLES


# What each role lets one do, as roles: an admin does everything, operators and support
# also see. A key's role is capped by its owner's through these sets.
IMPLIED = {ADMIN: frozenset(ALL_ROLES), OPERATOR: frozenset({OPERATOR, VIEWER}),
           SUPPORT: frozenset({SUPPORT, VIEWER}), VIEWER: frozenset({VIEWER})}


@dataclass(frozen=True)
class KeyScope:
    """What an API key allows: one team, one role (approvals.apikeys attaches it to the user).

    A request made with a key carries its owner as ``request.auth`` with ``key_scope`` set;
    every function here then answers for the key: only its team, and only the roles both
    the key and its owner (now) hold there.
    """

    key_id: int
    team_id: int
    role: str


def implied(held: frozenset[str] | set[str]) -> frozenset[str]:
    """Return every role the roles in ``held`` let one act as."""
    return frozenset().union(*(IMPLIED.get(r, frozenset()) for r in held))


def role_covered(held: frozenset[str], role: str) -> bool:
    """Return True when someone holding ``held`` may give a key ``role`` (not above theirs)."""
    return role in implied(held)


def top_role(held: frozenset[str]) -> str | None:
    """Return the one role that covers the most of ``held`` (admins first), or None."""
    return next((r for r in (ADMIN, OPERATOR, SUPPORT, VIEWER) if r in held), None)


def _key_scope(user: Any) -> KeyScope | None:
    return getattr(user, "key_scope", None)


def _active(user: Any) -> bool:
    return (user is not None and getattr(user, "is_authenticated", False)
            and getattr(user, "is_active", False))


def installation_roles(user: Any) -> frozenset[str]:
    """Return the roles ``user`` holds in every team (groups; superusers hold all).

    A request made with an API key holds none: a key acts in its one team only.
    """
    return frozenset() if _key_scope(user) else _groups(user)


def _groups(user: Any) -> frozenset[str]:
    if not _active(user):
        return frozenset()
    if user.is_superuser:
        return frozenset(ALL_ROLES)
    cached = getattr(user, "_agentops_roles", None)
    if cached is None:
        cached = frozenset(user.groups.values_list("name", flat=True)) & frozenset(ALL_ROLES)
        user._agentops_roles = cached
    return cached


def team_roles(user: Any) -> dict[int, str]:
    """Return {team id: role} of the user's memberships (read once per user object)."""
    if not _active(user) or getattr(user, "pk", None) is None:  # unsaved: no memberships
        return {}
    cached = getattr(user, "_agentops_team_roles", None)
    if cached is None:
        cached = dict(user.memberships.values_list("team_id", "role"))
        user._agentops_team_roles = cached
    return cached


def _team_id(team: Any) -> int:
    return getattr(team, "pk", team)


def user_roles(user: Any, team: Any = None) -> frozenset[str]:
    """Return the roles ``user`` holds in ``team`` (None: installation-wide or in any team).

    For a request made with an API key: the roles the key's role and its owner's current
    roles in the key's team both allow, and nothing in any other team.
    """
    scope = _key_scope(user)
    if scope is not None:
        if team is not None and _team_id(team) != scope.team_id:
            return frozenset()
        return IMPLIED.get(scope.role, frozenset()) & implied(_owner_roles(user, scope.team_id))
    return _owner_roles(user, team)


def _owner_roles(user: Any, team: Any) -> frozenset[str]:
    held = _groups(user)
    if team is None:
        return held | frozenset(team_roles(user).values())
    role = team_roles(user).get(_team_id(team))
    return held | {role} if role else held


def has_role(user: Any, *roles: str, team: Any = None) -> bool:
    """Return True when the user holds any of ``roles`` in ``team`` (admins hold all of them)."""
    held = user_roles(user, team)
    return ADMIN in held or bool(held & set(roles))


def team_ids_for(user: Any, *roles: str) -> frozenset[int] | None:
    """Return the ids of the teams where ``user`` holds any of ``roles`` (none given: any role).

    None means every team: the user holds one of them installation-wide. Scope a queryset
    with ``qs if ids is None else qs.filter(team_id__in=ids)``. A request made with an API
    key (``request.auth`` carries its KeyScope) gets at most the key's team, never None.
    """
    wanted = set(roles or ALL_ROLES) | {ADMIN}
    scope = _key_scope(user)
    if scope is not None:
        return frozenset({scope.team_id}) if user_roles(user, scope.team_id) & wanted else (
            frozenset())
    if installation_roles(user) & wanted:
        return None
    return frozenset(t for t, role in team_roles(user).items() if role in wanted)


def is_installation_admin(user: Any) -> bool:
    """Return True for the installation's admins (the admins group, superusers)."""
    return ADMIN in installation_roles(user)


def can_view(user: Any, team: Any = None) -> bool:
    """Return True when the user may see runs (of ``team``, or of some team)."""
    return bool(user_roles(user, team))


def can_operate(user: Any, team: Any = None) -> bool:
    """Return True when the user may resolve runs (retry, skip, rollback, terminate...)."""
    return has_role(user, OPERATOR, team=team)


def can_decide_approvals(user: Any, team: Any = None) -> bool:
    """Return True when the user may approve, reject or edit approvals."""
    return has_role(user, SUPPORT, team=team)


def can_see_results(user: Any, team: Any = None) -> bool:
    """Return True when the user may read full tool results and logs (not only summaries)."""
    return has_role(user, OPERATOR, SUPPORT, team=team)


def can_admin(user: Any, team: Any = None) -> bool:
    """Return True when the user may set budgets, limits and users (of ``team``, or of some)."""
    return has_role(user, ADMIN, team=team)
