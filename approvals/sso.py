"""A person signing in through the identity provider: find or create their user, then set their
roles to exactly what their groups claim says (docs/sso.md)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from approvals.audit import audit_record
from approvals.errors import SignInRefused
from approvals.roles import ALL_ROLES
from approvals.sso_map import ClaimedRoles, RoleGrant, claimed_roles
from approvals.users import memberships_replace
from runs.models import Team

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClaimNames:
    """Which claims hold the username and the groups, and what the groups give."""

    username: str
    groups: str
    role_map: dict[str, tuple[RoleGrant, ...]]


def sso_user_sync(*, claims: dict[str, Any], names: ClaimNames) -> Any:
    """Return the user the verified ``claims`` name, created on first sign-in, with the roles
    their groups give now (a group no longer claimed takes its role away).

    Raises SignInRefused when the claims name no username, or name a local account that
    signs in with a password (single sign-on never takes one over).
    """
    username = _username(claims, names.username)
    roles = claimed_roles(names.role_map, claims.get(names.groups))
    with transaction.atomic():
        user = _user(username, claims)
        _roles_set(user, roles)
    return user


def _username(claims: dict[str, Any], claim: str) -> str:
    username = str(claims.get(claim) or claims.get("email") or "").strip()
    if not username:
        raise SignInRefused(f"the provider sent neither a {claim!r} nor an 'email' claim, so "
                            "there is no username to sign you in with")
    field = get_user_model()._meta.get_field("username")
    try:
        field.run_validators(username)
    except ValidationError as exc:
        raise SignInRefused(f"the username {username!r} from the provider is not usable here: "
                            f"{' '.join(exc.messages)}") from exc
    return username


def _user(username: str, claims: dict[str, Any]) -> Any:
    model = get_user_model()
    user = model.objects.select_for_update().filter(username=username).first()
    if user is None:
        try:
            with transaction.atomic():
                user = model.objects.create_user(username=username)  # no usable password
            log.info("single sign-on created the user %s", username)
        except IntegrityError:
            # The same person's other first sign-in created it a moment ago.
            user = model.objects.select_for_update().get(username=username)
    if user.has_usable_password():
        raise SignInRefused(f"a local account named {username!r} signs in with a password; "
                            "single sign-on does not take it over (docs/sso.md)")
    if not user.is_active:
        raise SignInRefused(f"the account {username!r} is deactivated here")
    user.email = str(claims.get("email") or user.email)[:254]
    user.first_name = str(claims.get("given_name") or claims.get("name") or "")[:150]
    user.last_name = str(claims.get("family_name") or "")[:150]
    user.save(update_fields=["email", "first_name", "last_name"])
    return user


def _roles_set(user: Any, roles: ClaimedRoles) -> None:
    held = set(user.groups.filter(name__in=ALL_ROLES).values_list("name", flat=True))
    added, removed = sorted(roles.installation - held), sorted(held - roles.installation)
    for name in added:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    if removed:
        user.groups.remove(*Group.objects.filter(name__in=removed))
    if added or removed:
        audit_record(actor=user, action="user.sso_roles", reason="single sign-on",
                     data={"added": added, "removed": removed})
    teams = {team.slug: team for team in Team.objects.filter(slug__in=list(roles.teams))}
    missing = sorted(set(roles.teams) - set(teams))
    if missing:
        # A typo in the map must not sign anyone into the wrong team; doctor names it too.
        log.warning("AGENTOPS_OIDC_ROLE_MAP names teams that do not exist: %s",
                    ", ".join(missing))
    memberships_replace(user=user, roles={team: roles.teams[slug]
                                          for slug, team in teams.items()},
                        actor=user, reason="single sign-on")
    for cached in ("_agentops_team_roles", "_agentops_roles"):
        user.__dict__.pop(cached, None)  # the next role check reads the new groups
