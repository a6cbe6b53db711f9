"""Creating people and their roles: installation-wide (Django groups) and per team (memberships)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from agentops.errors import Conflict, InvalidInput
from approvals.audit import audit_record
from approvals.models import Membership
from approvals.roles import ALL_ROLES, TEAM_ROLES


class UserExists(Conflict):
    """A user with that name already exists."""

    code = "user_exists"


def user_create(*, username: str, roles: Sequence[str], email: str = "",
                existing: bool = False) -> tuple[Any, bool]:
    """Create ``username`` (no usable password) in ``roles``; return (user, created).

    With ``existing`` an existing user gets the roles added instead of an error.
    """
    unknown = sorted(set(roles) - set(ALL_ROLES))
    if unknown or not roles:
        raise InvalidInput(f"roles must be some of {', '.join(ALL_ROLES)} (got "
                           f"{', '.join(unknown) or 'none'})", roles=list(roles))
    if not username.strip():
        raise InvalidInput("the username must not be empty")
    model = get_user_model()
    with transaction.atomic():
        user = model.objects.filter(username=username).first()
        created = user is None
        if user is not None and not existing:
            held = ", ".join(user.groups.values_list("name", flat=True)) or "none"
            raise UserExists(f"user {username!r} already exists (roles: {held}); pass --existing "
                             "to add roles or a key to it", username=username)
        if user is None:
            user = model.objects.create_user(username=username, email=email)  # unusable password
        for role in roles:
            user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user, created


def membership_set(*, user: Any, team: Any, role: str | None, actor: Any = None,
                   reason: str = "") -> None:
    """Give ``user`` ``role`` in ``team`` (None removes them from it); audited when it changes."""
    if role is not None and role not in TEAM_ROLES:
        raise InvalidInput(f"role must be one of {', '.join(TEAM_ROLES)} (got {role!r})",
                           role=role)
    with transaction.atomic():
        before = Membership.objects.filter(team=team, user=user).values_list("role", flat=True)
        was = next(iter(before), None)
        if was == role:
            return
        if role is None:
            Membership.objects.filter(team=team, user=user).delete()
        else:
            Membership.objects.update_or_create(team=team, user=user, defaults={"role": role})
        audit_record(actor=actor, action="team.membership", reason=reason, team=team,
                     data={"user": user.get_username(), "team": team.slug, "from": was,
                           "to": role})
    for cached in ("_agentops_team_roles", "_agentops_roles"):
        user.__dict__.pop(cached, None)


def memberships_replace(*, user: Any, roles: Mapping[Any, str], actor: Any = None,
                        reason: str = "") -> None:
    """Set ``user``'s memberships to exactly ``roles`` ({team: role}); others are removed."""
    with transaction.atomic():
        keep = {team.pk for team in roles}
        for m in Membership.objects.filter(user=user).exclude(team_id__in=keep) \
                .select_related("team"):
            membership_set(user=user, team=m.team, role=None, actor=actor, reason=reason)
        for team, role in roles.items():
            membership_set(user=user, team=team, role=role, actor=actor, reason=reason)
