"""Creating people: a user with roles (Django groups), for the first login and the first API key."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from agentops.errors import Conflict, InvalidInput
from approvals.roles import ALL_ROLES


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
