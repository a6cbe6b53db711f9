"""How API callers prove who they are, how fast they may call, and what roles they need.

Two ways in: ``Authorization: Bearer <key>`` (programs) and the Django session (the console's
own calls, CSRF-checked on unsafe methods). Role checks use the same predicates as the console.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from ninja.errors import HttpError
from ninja.security import HttpBearer
from ninja.security.apikey import APIKeyCookie
from ninja.throttling import SimpleRateThrottle
from ninja.utils import check_csrf

from approvals import roles
from approvals.apikeys import ApiKeyRefused, apikey_verify


class ApiKeyAuth(HttpBearer):
    """Authenticate ``Authorization: Bearer ao_...`` against the stored key hashes.

    ``request.auth`` becomes the key's owner carrying ``key_scope`` (approvals.roles.KeyScope):
    every role predicate and ``roles.team_ids_for(request.auth, ...)`` then answer for the
    key (its one team, its role capped by the owner's), so views scope key and session
    callers alike with no check of their own.
    """

    def authenticate(self, request: HttpRequest, token: str) -> Any | None:
        """Return the key's owner, or None so the next method (or a 401) follows.

        An expired key, or one whose owner left its team, is refused here with a 401 that
        says so (ApiKeyRefused).
        """
        return apikey_verify(raw=token.strip())


class SessionAuth(APIKeyCookie):
    """Authenticate the logged-in console user; unsafe methods need the CSRF token."""

    param_name = settings.SESSION_COOKIE_NAME

    def _get_key(self, request: HttpRequest) -> str | None:
        return request.COOKIES.get(self.param_name)

    def authenticate(self, request: HttpRequest, key: str | None) -> Any | None:
        """Return the session user when logged in; unsafe methods must carry the CSRF token."""
        user = getattr(request, "user", None)
        if not key or user is None or not user.is_authenticated:
            # Only a caller who has a session can be asked for a CSRF token; anyone else is
            # simply unauthenticated (401), not "CSRF failed" (403).
            return None
        if self.csrf and not getattr(request, "_ninja_csrf_exempt", False) and check_csrf(request):
            raise HttpError(403, "CSRF check failed: send the X-CSRFToken header")
        return user


class UserRateThrottle(SimpleRateThrottle):
    """Limit calls per user (or per address when anonymous) to ``AGENTOPS_API_RATE``."""

    scope = "agentops_api"

    def __init__(self) -> None:
        # The rate is read per request (not at import) so settings overrides apply.
        self.rate = None
        self.num_requests = self.duration = None

    def allow_request(self, request: HttpRequest) -> bool:
        """Return False when the caller exceeded the configured rate."""
        self.rate = getattr(settings, "AGENTOPS_API_RATE", None)
        if not self.rate:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request)

    def get_cache_key(self, request: HttpRequest) -> str | None:
        """Key the history by user id, falling back to the client address."""
        user = getattr(request, "auth", None)
        ident = f"u{user.pk}" if getattr(user, "pk", None) else self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}


class RoleRequired(PermissionDenied):
    """The caller is authenticated but lacks the role the endpoint needs."""

    def __init__(self, what: str) -> None:
        super().__init__(f"your role does not allow you to {what}")
        self.what = what


def require(request: HttpRequest, check: Callable[[Any], bool], what: str) -> Any:
    """Return the caller when ``check(user)`` holds, else raise RoleRequired naming ``what``."""
    user = getattr(request, "auth", None)
    if not check(user):
        raise RoleRequired(what)
    return user


def viewer(request: HttpRequest) -> Any:
    """Return the caller if they may see runs at all."""
    return require(request, roles.can_view, "see runs")


def operator(request: HttpRequest) -> Any:
    """Return the caller if they may act on runs."""
    return require(request, roles.can_operate, "act on runs")


def support(request: HttpRequest) -> Any:
    """Return the caller if they may decide approvals."""
    return require(request, roles.can_decide_approvals, "decide approvals")


def admin(request: HttpRequest) -> Any:
    """Return the caller if they may change budgets and limits."""
    return require(request, roles.can_admin, "change budgets and limits")


can_see_results = roles.can_see_results


API_AUTH = [ApiKeyAuth(), SessionAuth(csrf=True)]


def docs_guard(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Serve /api/docs and /api/openapi.json to signed-in users and API-key holders only.

    ``AGENTOPS_API_DOCS_PUBLIC=1`` serves them to anyone. Others are sent to the login page
    (the docs page) or answered 401 (the JSON document).
    """

    @functools.wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if getattr(settings, "AGENTOPS_API_DOCS_PUBLIC", False) or _known_caller(request):
            return view(request, *args, **kwargs)
        if request.path.endswith(".json"):
            body = {"error": {"code": "unauthenticated", "details": {},
                              "message": "log in to the console or send an API key to read "
                                         "the API description"}}
            return JsonResponse(body, status=401, headers={"WWW-Authenticate": "Bearer"})
        return redirect_to_login(request.get_full_path(), reverse("console:login"))

    return guarded


def _known_caller(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return True
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    try:
        return scheme.lower() == "bearer" and apikey_verify(raw=token.strip()) is not None
    except ApiKeyRefused:
        return False
