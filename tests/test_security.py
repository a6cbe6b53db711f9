"""Production security settings, the Content-Security-Policy, CSRF and login throttling."""
from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.core.cache import cache
from django.core.signals import setting_changed
from django.test import Client

from agentops import settings_security
from agentops.security import CONTENT_SECURITY_POLICY

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.health_urls")]

_AXES_RECEIVERS = {
    user_login_failed: "handle_user_login_failed",
    user_logged_in: "handle_user_logged_in",
    user_logged_out: "handle_user_logged_out",
    setting_changed: "handle_setting_changed",
}


def _apply(settings, *, debug: bool) -> None:
    """Apply settings_security to a copy of the current settings and install the result."""
    values = {
        "INSTALLED_APPS": list(settings.INSTALLED_APPS),
        "MIDDLEWARE": list(settings.MIDDLEWARE),
        "STORAGES": dict(settings.STORAGES),
    }
    settings_security.apply(values, debug=debug)
    for name, value in values.items():
        setattr(settings, name, value)


@contextmanager
def _with_axes(settings, tmp_path, *, debug: bool) -> Iterator[None]:
    """Install the security settings; use axes' cache handler until axes is migrated here."""
    migrated = "axes" in django_settings.INSTALLED_APPS
    _apply(settings, debug=debug)
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # speed only
    (tmp_path / "static").mkdir()
    settings.STATIC_ROOT = str(tmp_path / "static")
    if not migrated:
        settings.AXES_HANDLER = "axes.handlers.cache.AxesCacheHandler"
    import axes.conf
    from axes import signals
    from axes.handlers.proxy import AxesProxyHandler

    importlib.reload(axes.conf)  # axes sets its defaults on settings once, at first import
    for signal, name in _AXES_RECEIVERS.items():
        signal.connect(getattr(signals, name))
    AxesProxyHandler.get_implementation(force=True)
    cache.clear()
    try:
        yield
    finally:
        cache.clear()
        if not migrated:  # axes' receivers must not outlive the app in this process
            for signal, name in _AXES_RECEIVERS.items():
                signal.disconnect(getattr(signals, name))


@pytest.fixture
def secured(settings, tmp_path):
    """The project's settings with settings_security applied as in production (DEBUG off)."""
    with _with_axes(settings, tmp_path, debug=False):
        yield settings


@pytest.fixture
def throttled(settings, tmp_path):
    """Login throttling on (django-axes) as configured by settings_security; a user "ops"."""
    with _with_axes(settings, tmp_path, debug=True):
        get_user_model().objects.create_user("ops", password="right-password-123")
        yield settings


def _login(client: Client, password: str, username: str = "ops"):
    return client.post("/login/", {"username": username, "password": password})


def test_apply_turns_on_production_settings_only_when_debug_is_off():
    prod, dev = {"MIDDLEWARE": [settings_security.SECURITY_MIDDLEWARE]}, {}
    settings_security.apply(prod, debug=False)
    settings_security.apply(dev, debug=True)
    assert prod["SESSION_COOKIE_SECURE"] and prod["CSRF_COOKIE_SECURE"]
    assert prod["SECURE_HSTS_SECONDS"] >= 31_536_000 and prod["SECURE_SSL_REDIRECT"]
    assert not dev["SESSION_COOKIE_SECURE"] and dev["SECURE_HSTS_SECONDS"] == 0
    assert prod["SESSION_COOKIE_AGE"] == 8 * 3600 and prod["SESSION_EXPIRE_AT_BROWSER_CLOSE"]
    assert prod["AXES_FAILURE_LIMIT"] == 5 and prod["AXES_RESET_ON_SUCCESS"]
    assert "SECURE_PROXY_SSL_HEADER" not in prod  # opt-in only
    assert prod["STORAGES"]["staticfiles"]["BACKEND"].startswith("whitenoise.")


def test_apply_orders_middleware_and_is_idempotent(monkeypatch):
    monkeypatch.setenv("AGENTOPS_PROXY_SSL_HEADER", "1")
    values = {"MIDDLEWARE": list(django_settings.MIDDLEWARE), "INSTALLED_APPS": ["runs"]}
    added = settings_security.apply(values, debug=False)
    again = settings_security.apply(values, debug=False)
    mw = values["MIDDLEWARE"]
    assert mw[: 3] == [settings_security.SECURITY_MIDDLEWARE,
                       "whitenoise.middleware.WhiteNoiseMiddleware",
                       "agentops.security.ContentSecurityPolicyMiddleware"]
    assert mw[-1] == "axes.middleware.AxesMiddleware"
    assert values["AUTHENTICATION_BACKENDS"][0] == "axes.backends.AxesStandaloneBackend"
    assert values["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_PROTO", "https")
    assert added["INSTALLED_APPS"] == ["axes"] and again["INSTALLED_APPS"] == []
    assert values["MIDDLEWARE"].count("axes.middleware.AxesMiddleware") == 1


def test_pages_carry_a_strict_content_security_policy(client, secured):
    response = client.get("/page/", secure=True)
    assert response.status_code == 200
    csp = response["Content-Security-Policy"]
    assert csp == CONTENT_SECURITY_POLICY
    assert "script-src 'self';" in csp and "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp and "connect-src 'self' ws: wss:" in csp


def test_production_responses_set_hsts_and_redirect_plain_http(client, secured):
    assert client.get("/page/").status_code == 301  # plain HTTP goes to HTTPS
    response = client.get("/page/", secure=True)
    assert response["Strict-Transport-Security"].startswith("max-age=31536000")
    assert response["X-Frame-Options"] == "DENY"
    assert response["Referrer-Policy"] == "same-origin"
    assert client.get("/healthz").status_code == 200  # probes are exempt from the redirect


def test_session_cookie_is_secure_httponly_and_expires(client, secured):
    get_user_model().objects.create_user("ops", password="right-password-123")
    response = client.post("/login/", {"username": "ops", "password": "right-password-123"},
                           secure=True)
    assert response.status_code == 302
    cookie = response.cookies[secured.SESSION_COOKIE_NAME]
    assert cookie["secure"] and cookie["httponly"] and cookie["samesite"] == "Lax"
    assert not cookie["max-age"]  # a browser-session cookie, not a persistent one
    assert client.session.get_expiry_age() == 8 * 3600


def test_login_without_a_csrf_token_is_refused(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    get_user_model().objects.create_user("ops", password="right-password-123")
    client = Client(enforce_csrf_checks=True)
    response = client.post("/login/", {"username": "ops", "password": "right-password-123"})
    assert response.status_code == 403


def test_the_sixth_login_after_five_failures_is_refused(client, throttled):
    for _ in range(4):
        assert _login(client, "wrong").status_code == 200  # the form again, with an error
    assert _login(client, "wrong").status_code == 429  # the fifth failure locks the account
    locked = _login(client, "right-password-123")
    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session


def test_a_lockout_is_per_user_and_success_resets_the_count(client, throttled):
    get_user_model().objects.create_user("other", password="other-password-123")
    for _ in range(4):
        _login(client, "wrong")
    assert _login(client, "right-password-123").status_code == 302  # resets the count
    client.logout()
    for _ in range(4):
        _login(client, "wrong")
    assert _login(client, "right-password-123").status_code == 302
    client.logout()
    for _ in range(5):
        _login(client, "wrong")
    assert _login(client, "other-password-123", username="other").status_code == 302


_INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", re.I)
_INLINE_HANDLER = re.compile(r"\s(on[a-z]+|hx-on[:\w-]*)\s*=", re.I)


def test_console_templates_need_no_inline_script():
    """The CSP refuses inline scripts and handlers, so the templates must not use them."""
    offenders = []
    for path in Path(django_settings.BASE_DIR, "templates").rglob("*.html"):
        text = path.read_text()
        if _INLINE_SCRIPT.search(text) or _INLINE_HANDLER.search(text):
            offenders.append(str(path))
    assert offenders == []
