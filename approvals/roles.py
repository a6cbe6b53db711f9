"""Roles are Django groups; these names and predicates are the only place that knows them."""
from __future__ import annotations

from typing import Any

VIEWER = "viewers"
OPERATOR = "operators"
SUPPORT = "support"
ADMIN = "admins"
ALL_ROLES = (VIEWER, OPERATOR, SUPPORT, ADMIN)


def user_roles(user: Any) -> frozenset[str]:
    """Return the role names a user holds; superusers hold every role."""
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return frozenset()
    if user.is_superuser:
        return frozenset(ALL_ROLES)
    cached = getattr(user, "_agentops_roles", None)
    if cached is None:
        cached = frozenset(user.groups.values_list("name", flat=True)) & frozenset(ALL_ROLES)
        user._agentops_roles = cached
    return cached


def has_role(user: Any, *roles: str) -> bool:
    """Return True when the user holds any of ``roles`` (admins hold all of them)."""
    held = user_roles(user)
    return ADMIN in held or bool(held & set(roles))


def can_view(user: Any) -> bool:
    """Return True when the user may see runs at all."""
    return bool(user_roles(user))


def can_operate(user: Any) -> bool:
    """Return True when the user may resolve runs (retry, skip, rollback, terminate...)."""
    return has_role(user, OPERATOR)


def can_decide_approvals(user: Any) -> bool:
    """Return True when the user may approve, reject or edit approvals."""
    return has_role(user, SUPPORT)


def can_see_results(user: Any) -> bool:
    """Return True when the user may read full tool results and logs (not only summaries)."""
    return has_role(user, OPERATOR, SUPPORT)


def can_admin(user: Any) -> bool:
    """Return True when the user may set budgets, limits and users."""
    return has_role(user, ADMIN)
