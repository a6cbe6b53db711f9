"""Saved views of the run list (save the current filters under a name, delete one) and the
colour-theme toggle: small POST forms that work without JavaScript and redirect back."""
from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from agentops.theme import COOKIE, MAX_AGE, THEMES
from runs.errors import RunError
from runs.services_saved_views import saved_view_create, saved_view_delete
from runs.views._common import role_required


def _queue_url(query: str = "") -> str:
    base = reverse("console:queue")
    return f"{base}?{query}" if query else base


@require_POST
@role_required()
def saved_view_save(request: HttpRequest) -> HttpResponse:
    """Save the submitted run-list query under a name, then show the list it describes."""
    query = request.POST.get("query", "").lstrip("?")
    try:
        view = saved_view_create(user=request.user, name=request.POST.get("name", ""),
                                 query=query, team=request.POST.get("team", "").strip())
    except RunError as exc:
        messages.error(request, f"The view was not saved: {exc.message}.")
        return HttpResponseRedirect(_queue_url(query), status=303)
    messages.success(request, f"Saved the view “{view.name}”.")
    return HttpResponseRedirect(_queue_url(view.query), status=303)


@require_POST
@role_required()
def saved_view_remove(request: HttpRequest, view_id: int) -> HttpResponse:
    """Delete one of the user's saved views."""
    try:
        name = saved_view_delete(user=request.user, view_id=view_id)
    except RunError as exc:
        messages.error(request, f"Nothing deleted: {exc.message}.")
        return HttpResponseRedirect(_queue_url(), status=303)
    messages.success(request, f"Deleted the view “{name}”.")
    return HttpResponseRedirect(_queue_url(request.POST.get("back", "").lstrip("?")),
                                status=303)


@require_POST
def theme_set(request: HttpRequest) -> HttpResponse:
    """Remember the chosen colour theme in a cookie and go back to the page it was set on."""
    theme = request.POST.get("theme", "")
    back: Any = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        back = reverse("console:queue")
    response = HttpResponseRedirect(back, status=303)
    if theme not in THEMES:
        return response
    if theme == "auto":
        response.delete_cookie(COOKIE, samesite="Lax")
    else:
        response.set_cookie(COOKIE, theme, max_age=MAX_AGE, samesite="Lax",
                            secure=request.is_secure(), httponly=True)
    return response
