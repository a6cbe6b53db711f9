"""Signing in and out: the password form, single sign-on through the identity provider
(mozilla-django-oidc's views, docs/sso.md) and the provider's end-session on the way out."""
from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import auth, messages
from django.contrib.auth.views import LoginView
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from agentops.sso_backend import REFUSAL_ATTR


def sso_on() -> bool:
    """Return True when single sign-on is configured (AGENTOPS_OIDC_CLIENT_ID is set)."""
    return bool(getattr(settings, "OIDC_RP_CLIENT_ID", ""))


class SignInView(LoginView):
    """The login page: the password form, a "Sign in with <provider>" button, or both."""

    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """Add the provider's name and whether the password form is offered."""
        context = super().get_context_data(**kwargs)
        context["password_login"] = self._password_login()
        if sso_on():
            context["sso_name"] = settings.AGENTOPS_OIDC_PROVIDER_NAME
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """Refuse a password when AGENTOPS_OIDC_PASSWORD_LOGIN is off."""
        if not self._password_login():
            messages.error(request, "Password sign-in is off here; sign in with "
                           f"{settings.AGENTOPS_OIDC_PROVIDER_NAME}.")
            return HttpResponseRedirect(reverse("console:login"))
        return super().post(request, *args, **kwargs)

    @staticmethod
    def _password_login() -> bool:
        return not sso_on() or settings.AGENTOPS_OIDC_PASSWORD_LOGIN


class SsoStart(OIDCAuthenticationRequestView):
    """Send the browser to the provider's authorization endpoint (404 when SSO is off)."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """Answer only when single sign-on is configured."""
        if not sso_on():
            raise Http404("single sign-on is not configured")
        return super().dispatch(request, *args, **kwargs)


class SsoCallback(OIDCAuthenticationCallbackView):
    """The provider's redirect back: verify, sign in, or say on the login page why not."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """Answer only when single sign-on is configured."""
        if not sso_on():
            raise Http404("single sign-on is not configured")
        return super().dispatch(request, *args, **kwargs)

    @property
    def failure_url(self) -> str:
        """Back to the login page, which shows why."""
        return reverse("console:login")

    def login_failure(self) -> HttpResponse:
        """Back to the login page with the reason the sign-in was refused."""
        reason = (getattr(self.request, REFUSAL_ATTR, "")
                  or self.request.GET.get("error_description") or self.request.GET.get("error")
                  or "the sign-in was not completed")
        messages.error(self.request, f"Sign-in with {settings.AGENTOPS_OIDC_PROVIDER_NAME} "
                       f"failed: {reason}")
        return super().login_failure()


@require_POST
def sign_out(request: HttpRequest) -> HttpResponse:
    """Sign out here, then at the provider too when the session came from it."""
    login = reverse("console:login")
    id_token = request.session.get("oidc_id_token")
    endpoint = getattr(settings, "AGENTOPS_OIDC_END_SESSION_ENDPOINT", "")
    auth.logout(request)
    if not (sso_on() and id_token and endpoint):
        return HttpResponseRedirect(login)
    query = urlencode({"id_token_hint": id_token, "client_id": settings.OIDC_RP_CLIENT_ID,
                       "post_logout_redirect_uri": request.build_absolute_uri(login)})
    # A page that moves on by itself, not a redirect: the console's CSP (form-action 'self')
    # forbids a form post from being redirected to another origin.
    return render(request, "registration/signed_out.html", {
        "end_session_url": f"{endpoint}?{query}",
        "sso_name": settings.AGENTOPS_OIDC_PROVIDER_NAME})
