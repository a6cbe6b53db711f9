"""Which teams' runs a query may return: the one argument every selector of runs takes.

``teams`` is ``approvals.roles.team_ids_for(user, ...)``: None means every team (an
installation-wide role), otherwise the ids of the teams whose runs the caller may see or act
on (possibly empty: then nothing). Selectors take it as a required keyword argument, so a
view cannot forget it; ``scoped`` applies it to a queryset.
"""
from __future__ import annotations

from typing import TypeVar

from django.db.models import QuerySet

from approvals.roles import team_ids_for

Teams = frozenset[int] | None
Q_ = TypeVar("Q_", bound=QuerySet)


def scoped(qs: Q_, teams: Teams, field: str = "team_id") -> Q_:
    """Return ``qs`` limited to rows whose ``field`` (a team id) is in ``teams``."""
    return qs if teams is None else qs.filter(**{f"{field}__in": teams})


def visible_teams(user: object) -> Teams:
    """Return the teams whose runs ``user`` may see (any role held there)."""
    return team_ids_for(user)

