"""Helpers every console page shares: role gates, role flags for templates, partial rendering."""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from approvals.roles import (
    can_admin,
    can_decide_approvals,
    can_operate,
    can_see_results,
    can_view,
    installation_roles,
    team_roles,
    user_roles,
)
from runs.models import Team

View = Callable[..., HttpResponse]


def role_required(predicate: Callable[[Any], bool] = can_view) -> Callable[[View], View]:
    """Send anonymous users to the login page; refuse signed-in users without the role (403)."""

    def decorate(view: View) -> View:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path(), reverse("console:login"))
            if not user_roles(request.user):
                # Signed in (often through single sign-on) but no group maps to a role here.
                return render(request, "no_role.html", {"perm": perms(request.user),
                                                        "sso_name": _sso_name()}, status=403)
            if not predicate(request.user):
                raise PermissionDenied("Your role does not allow this.")
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


def _sso_name() -> str:
    on = getattr(settings, "OIDC_RP_CLIENT_ID", "")
    return getattr(settings, "AGENTOPS_OIDC_PROVIDER_NAME", "") if on else ""


def perms(user: Any, team: Any = None) -> dict[str, Any]:
    """Return what the user may do (in ``team``, a run page's team; else in some team), for
    templates to hide what they may not."""
    return {
        "view": can_view(user, team),
        "operate": can_operate(user, team),
        "decide": can_decide_approvals(user, team),
        "admin": can_admin(user, team),
        "results": can_see_results(user, team),
        "roles": sorted(user_roles(user, team)),
        "teams": team_badges(user),
    }


def team_badges(user: Any) -> list[str]:
    """Return "team: role" for each team membership of ``user`` (the top bar's list), after
    "all teams: ..." for installation-wide roles; [] for a person with no membership."""
    own = team_roles(user)
    if not own:
        return []
    wide = sorted(installation_roles(user))
    slugs = dict(Team.objects.filter(pk__in=own).values_list("pk", "slug"))
    return ([f"all teams: {', '.join(wide)}"] if wide else []) + sorted(
        f"{slugs.get(t, t)}: {role}" for t, role in own.items())


def page(request: HttpRequest, template: str, context: dict[str, Any], *,
         partial: str | None = None, status: int = 200, always_partial: bool = False,
         team: Any = None) -> HttpResponse:
    """Render ``template`` (or only its ``partial`` for htmx requests) with role flags (held
    in ``team``, a run's team, when the page is about one run)."""
    use_partial = partial and (always_partial or getattr(request, "htmx", False))
    name = f"{template}#{partial}" if use_partial else template
    return render(request, name, {**context, "perm": perms(request.user, team)}, status=status)


def int_or_none(raw: str | None) -> int | None:
    """Parse a positive integer query parameter; anything else is None."""
    try:
        value = int(raw or "")
    except ValueError:
        return None
    return value if value > 0 else None


def forbidden(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's handler403: the "Not allowed" page, with the top bar's team roles and links."""
    user = request.user
    return render(request, "403.html", {"exception": str(exception or ""),
                                        "perm": perms(user) if user.is_authenticated else {}},
                  status=403)
