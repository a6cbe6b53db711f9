"""The production security block of settings.py, as one function settings.py calls:

    from agentops import settings_security
    settings_security.apply(globals(), debug=DEBUG)

It sets cookie, HTTPS, HSTS, session, login-throttling (django-axes), static-file (whitenoise)
and /metrics settings from the environment, and inserts the apps, middleware and
authentication backends they need. Calling it twice changes nothing more.
"""
from __future__ import annotations

import os
from typing import Any

SECURITY_MIDDLEWARE = "django.middleware.security.SecurityMiddleware"
AFTER_SECURITY_MIDDLEWARE = [
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "agentops.security.ContentSecurityPolicyMiddleware",
]
LAST_MIDDLEWARE = ["axes.middleware.AxesMiddleware"]
APPS = ["axes"]
# Must come first among the backends: it refuses a locked-out login before any other runs.
AXES_BACKEND = "axes.backends.AxesStandaloneBackend"
DEFAULT_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]
# Probes and scrapers talk plain HTTP inside the network; never redirect them to HTTPS.
REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default).strip()


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    try:
        return int(raw) if raw.strip() else default
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from exc


def _csv(name: str, default: str) -> list[str]:
    return [part.strip() for part in _env(name, default).split(",") if part.strip()]


def _https(debug: bool) -> dict[str, Any]:
    # AGENTOPS_HTTPS=0 serves plain HTTP with DEBUG off (the local demo on 127.0.0.1 only).
    secure = _env_bool("AGENTOPS_HTTPS", not debug)
    values: dict[str, Any] = {
        "SESSION_COOKIE_SECURE": secure,
        "CSRF_COOKIE_SECURE": secure,
        "SESSION_COOKIE_HTTPONLY": True,
        "SESSION_COOKIE_SAMESITE": "Lax",
        "CSRF_COOKIE_SAMESITE": "Lax",
        "SESSION_COOKIE_AGE": _env_int("AGENTOPS_SESSION_AGE_S", 8 * 3600),
        "SESSION_EXPIRE_AT_BROWSER_CLOSE": True,
        "SECURE_CONTENT_TYPE_NOSNIFF": True,
        "SECURE_REFERRER_POLICY": "same-origin",
        "SECURE_CROSS_ORIGIN_OPENER_POLICY": "same-origin",
        "X_FRAME_OPTIONS": "DENY",
        "SECURE_SSL_REDIRECT": secure and _env_bool("AGENTOPS_SSL_REDIRECT", True),
        "SECURE_REDIRECT_EXEMPT": REDIRECT_EXEMPT,
        "SECURE_HSTS_SECONDS": _env_int("AGENTOPS_HSTS_SECONDS", 31_536_000) if secure else 0,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": secure and _env_bool("AGENTOPS_HSTS_SUBDOMAINS", False),
        "SECURE_HSTS_PRELOAD": secure and _env_bool("AGENTOPS_HSTS_PRELOAD", False),
    }
    if _env_bool("AGENTOPS_PROXY_SSL_HEADER", False):
        # Only behind a proxy that sets (and strips client-sent) X-Forwarded-Proto.
        values["SECURE_PROXY_SSL_HEADER"] = ("HTTP_X_FORWARDED_PROTO", "https")
    return values


def _axes() -> dict[str, Any]:
    values: dict[str, Any] = {
        "AXES_ENABLED": _env_bool("AGENTOPS_LOGIN_THROTTLE", True),
        "AXES_FAILURE_LIMIT": _env_int("AGENTOPS_LOGIN_FAILURE_LIMIT", 5),
        "AXES_COOLOFF_TIME": 0.25,  # hours: a lockout lifts after 15 minutes
        "AXES_RESET_ON_SUCCESS": True,
        # Lock a username from one address: a whole office behind one NAT is not locked out
        # by one person's typos, and an attacker cannot lock a user out from elsewhere.
        "AXES_LOCKOUT_PARAMETERS": [["username", "ip_address"]],
        "AXES_USERNAME_FORM_FIELD": "username",
        # The client is who AGENTOPS_TRUSTED_PROXIES says (never the leftmost X-Forwarded-For,
        # which any client can write): the same rule as the /metrics allow-list.
        "AXES_CLIENT_IP_CALLABLE": "agentops.proxies.client_ip",
    }
    return values


def _observability() -> dict[str, Any]:
    return {
        "AGENTOPS_METRICS_ALLOW": _csv("AGENTOPS_METRICS_ALLOW", "127.0.0.1,::1"),
        "AGENTOPS_METRICS_TOKEN": _env("AGENTOPS_METRICS_TOKEN", ""),
        "AGENTOPS_METRICS_DB_GAUGES": _env_bool("AGENTOPS_METRICS_DB_GAUGES", True),
        "AGENTOPS_HEARTBEAT_MAX_AGE_S": float(_env("AGENTOPS_HEARTBEAT_MAX_AGE_S", "60")),
    }


def _secrets() -> dict[str, Any]:
    return {
        # Key of the HMAC in redaction markers; unset = derived from SECRET_KEY (dev only).
        "AGENTOPS_REDACTION_KEY": _env("AGENTOPS_REDACTION_KEY", ""),
        # Fernet keys sealing sensitive tool arguments, newest first (rotate-keys re-seals).
        "AGENTOPS_SEAL_KEYS": _csv("AGENTOPS_SEAL_KEYS", ""),
        # HMAC-SHA256 keys signing checkpoint exports, newest first; all of them verify.
        "AGENTOPS_CHECKPOINT_KEYS": _csv("AGENTOPS_CHECKPOINT_KEYS", ""),
        "AGENTOPS_CHECKPOINT_MAX_BYTES": _env_int("AGENTOPS_CHECKPOINT_MAX_BYTES", 64 << 20),
        # Names of environment variables whose values are secrets (tool credentials...).
        "AGENTOPS_SECRET_ENV": _csv("AGENTOPS_SECRET_ENV", ""),
        # Which proxies may say who the client is: a hop count ("1") or CIDRs ("10.0.0.0/8").
        "AGENTOPS_TRUSTED_PROXIES": _env("AGENTOPS_TRUSTED_PROXIES", "")
        or _env("AGENTOPS_PROXY_COUNT", ""),
        # /api/docs and /api/openapi.json for anyone (on) or for logged-in users only (off).
        "AGENTOPS_API_DOCS_PUBLIC": _env_bool("AGENTOPS_API_DOCS_PUBLIC", False),
    }


def _insert_after(items: list[str], anchor: str, new: list[str]) -> list[str]:
    missing = [item for item in new if item not in items]
    if not missing:
        return items
    at = items.index(anchor) + 1 if anchor in items else 0
    return items[:at] + missing + items[at:]


def _append(items: list[str], new: list[str]) -> list[str]:
    return items + [item for item in new if item not in items]


def _static_from_source(debug: bool) -> bool:
    # AGENTOPS_STATIC_FINDERS=1: whitenoise serves static files straight from the source folders
    # (no collectstatic); the demo runs with DEBUG off this way.
    return debug or _env_bool("AGENTOPS_STATIC_FINDERS", False)


def _static_storage(storages: dict[str, Any], debug: bool) -> dict[str, Any]:
    # The manifest storage needs `collectstatic` to have run, which a laptop has not.
    backend = (
        "django.contrib.staticfiles.storage.StaticFilesStorage" if _static_from_source(debug)
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    )
    return {**storages, "staticfiles": {"BACKEND": backend}}


def apply(settings_globals: dict[str, Any], debug: bool) -> dict[str, list[str]]:
    """Set the security settings in ``settings_globals``; return the list entries it added."""
    before = {k: list(settings_globals.get(k, [])) for k in ("INSTALLED_APPS", "MIDDLEWARE")}
    settings_globals.update(_https(debug))
    settings_globals.update(_axes())
    settings_globals.update(_observability())
    settings_globals.update(_secrets())
    apps = _append(list(settings_globals.get("INSTALLED_APPS", [])), APPS)
    middleware = _insert_after(
        list(settings_globals.get("MIDDLEWARE", [])), SECURITY_MIDDLEWARE, AFTER_SECURITY_MIDDLEWARE
    )
    middleware = _append(middleware, LAST_MIDDLEWARE)
    settings_globals["INSTALLED_APPS"] = apps
    settings_globals["MIDDLEWARE"] = middleware
    backends = list(settings_globals.get("AUTHENTICATION_BACKENDS", DEFAULT_BACKENDS))
    settings_globals["AUTHENTICATION_BACKENDS"] = [AXES_BACKEND] + [
        b for b in backends if b != AXES_BACKEND
    ]
    settings_globals["STORAGES"] = _static_storage(settings_globals.get("STORAGES", {}), debug)
    settings_globals["WHITENOISE_USE_FINDERS"] = _static_from_source(debug)
    return {
        "INSTALLED_APPS": [a for a in apps if a not in before["INSTALLED_APPS"]],
        "MIDDLEWARE": [m for m in middleware if m not in before["MIDDLEWARE"]],
        "AUTHENTICATION_BACKENDS": [AXES_BACKEND],
    }
