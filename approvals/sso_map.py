"""The single sign-on role map: which group in the identity provider's claim gives which role.

AGENTOPS_OIDC_ROLE_MAP is JSON, group name → role or list of roles. A role is either an
installation-wide role ("admins", "operators", "support", "viewers") or a role in one team,
"<team-slug>:<role>". The map is parsed and checked when settings load, so a bad entry stops
the process with a message naming it; which teams exist is checked at each sign-in.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from approvals.roles import ADMIN, ALL_ROLES, OPERATOR, SUPPORT, VIEWER

SETTING = "AGENTOPS_OIDC_ROLE_MAP"
# One membership per team: when a person's groups give several roles in the same team, the
# first of these wins (operators and support are parallel; an operator may do more on a run).
TEAM_ROLE_PRECEDENCE = (ADMIN, OPERATOR, SUPPORT, VIEWER)
_SLUG = re.compile(r"^[-a-zA-Z0-9_]+$")


class RoleMapError(ValueError):
    """AGENTOPS_OIDC_ROLE_MAP is not valid; the message names the entry that is wrong."""


@dataclass(frozen=True)
class RoleGrant:
    """One role: installation-wide (``team`` is "") or in the team with slug ``team``."""

    role: str
    team: str = ""


@dataclass(frozen=True)
class ClaimedRoles:
    """The roles a person's groups give: installation-wide ones, and one role per team slug."""

    installation: frozenset[str] = frozenset()
    teams: dict[str, str] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """Return True when the groups give no role at all."""
        return not self.installation and not self.teams


def role_map_from_setting(raw: str) -> dict[str, tuple[RoleGrant, ...]]:
    """Parse AGENTOPS_OIDC_ROLE_MAP; raise RoleMapError naming the bad entry."""
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise RoleMapError(f"{SETTING} is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise RoleMapError(f"{SETTING} must be a JSON object of group name → role, e.g. "
                           '{"agentops-admins": "admins", "payments-ops": "payments:operators"}')
    return {str(group): _grants(str(group), value) for group, value in data.items()}


def _grants(group: str, value: Any) -> tuple[RoleGrant, ...]:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise RoleMapError(f"{SETTING}[{group!r}] is an empty list; give at least one role")
    return tuple(_grant(group, item) for item in values)


def _grant(group: str, item: Any) -> RoleGrant:
    where = f"{SETTING}[{group!r}]"
    if not isinstance(item, str):
        raise RoleMapError(f"{where} must be a role name or a list of them, got {item!r}")
    team, _, role = item.rpartition(":")
    if role not in ALL_ROLES:
        raise RoleMapError(f"{where}: {item!r} names no role; a role is one of "
                           f"{', '.join(ALL_ROLES)}, optionally after '<team-slug>:'")
    if ":" in item and not _SLUG.match(team):
        raise RoleMapError(f"{where}: {item!r} has no valid team slug before ':' (letters, "
                           "digits, '-' and '_')")
    return RoleGrant(role=role, team=team)


def claimed_roles(role_map: dict[str, tuple[RoleGrant, ...]], groups: Any) -> ClaimedRoles:
    """Return the roles ``groups`` (the claim's value: a list of names, or one name) give."""
    names = [groups] if isinstance(groups, str) else list(groups or [])
    installation: set[str] = set()
    teams: dict[str, set[str]] = {}
    for name in names:
        for grant in role_map.get(str(name), ()):
            if grant.team:
                teams.setdefault(grant.team, set()).add(grant.role)
            else:
                installation.add(grant.role)
    return ClaimedRoles(
        installation=frozenset(installation),
        teams={slug: next(r for r in TEAM_ROLE_PRECEDENCE if r in held)
               for slug, held in sorted(teams.items())})
