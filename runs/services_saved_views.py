"""Saved views of the run list: a user saves the current filters under a name, or deletes one."""
from __future__ import annotations

from typing import Any

from urllib.parse import parse_qsl

from django.db import IntegrityError, transaction

from approvals.roles import can_view, installation_roles, team_roles
from runs.errors import InvalidListQuery, SavedViewNameTaken, SavedViewNotFound
from runs.list_filters import saved_query_parse
from runs.models import SavedView, Team

MAX_VIEWS_PER_USER = 50


def saved_view_create(*, user: Any, name: str, query: str, team: str = "") -> SavedView:
    """Save ``query`` (a run-list query string) as ``user``'s view ``name`` of a team.

    The team is ``team`` (a slug), else the query's ``team`` filter, else the user's only
    team when they hold roles in one team alone; otherwise none (every team they see).
    Raises InvalidListQuery naming each bad filter or an unknown team, SavedViewNameTaken
    for a name in use.
    """
    owner = _team_of_view(user, team or dict(parse_qsl(query)).get("team", ""))
    name = " ".join((name or "").split())
    if not name:
        raise InvalidListQuery("give the view a name")
    if len(name) > SavedView._meta.get_field("name").max_length:
        raise InvalidListQuery("the name is longer than 80 characters")
    canonical = saved_query_parse(query).as_query_string()
    if SavedView.objects.filter(user=user).count() >= MAX_VIEWS_PER_USER:
        raise InvalidListQuery(f"you have {MAX_VIEWS_PER_USER} saved views; delete one first")
    try:
        with transaction.atomic():
            return SavedView.objects.create(user=user, name=name, query=canonical, team=owner)
    except IntegrityError as exc:
        raise SavedViewNameTaken(
            f"you already have a view named “{name}”; delete it first or pick another name",
            name=name) from exc


def saved_view_delete(*, user: Any, view_id: int) -> str:
    """Delete ``user``'s saved view ``view_id`` and return its name; SavedViewNotFound if none."""
    view = SavedView.objects.filter(user=user, pk=view_id).first()
    if view is None:
        raise SavedViewNotFound(f"you have no saved view #{view_id}", view_id=view_id)
    view.delete()
    return view.name


def _team_of_view(user: Any, slug: str) -> Team | None:
    if slug:
        team = Team.objects.filter(slug=slug).first()
        if team is None or not can_view(user, team):
            raise InvalidListQuery(f"no team {slug!r} whose runs you see")
        return team
    teams = team_roles(user)
    if len(teams) == 1 and not installation_roles(user):
        return Team.objects.get(pk=next(iter(teams)))
    return None
