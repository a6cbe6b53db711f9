"""Single sign-on with OpenID Connect (docs/sso.md), as one function settings.py calls:

    from agentops import settings_sso
    settings_sso.apply(globals(), os.environ)

Off unless AGENTOPS_OIDC_CLIENT_ID is set. Then it checks the other AGENTOPS_OIDC_* settings
(a missing endpoint or a bad role map stops the process with a message naming the setting),
sets mozilla-django-oidc's OIDC_* settings from them and adds the sign-in backend.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from approvals.sso_map import role_map_from_setting

BACKEND = "agentops.sso_backend.SsoBackend"
_REQUIRED = ("AGENTOPS_OIDC_ISSUER", "AGENTOPS_OIDC_AUTHORIZATION_ENDPOINT",
             "AGENTOPS_OIDC_TOKEN_ENDPOINT", "AGENTOPS_OIDC_JWKS_URI")


class SsoSettingError(ValueError):
    """An AGENTOPS_OIDC_* setting is missing or wrong; the message names it."""


def _env(name: str, env: Mapping[str, str], default: str = "") -> str:
    return (env.get(name) or default).strip()


def _env_bool(name: str, env: Mapping[str, str], default: bool) -> bool:
    raw = _env(name, env)
    return default if not raw else raw.lower() in {"1", "true", "yes", "on"}


def _env_float(name: str, env: Mapping[str, str], default: float) -> float:
    raw = _env(name, env)
    try:
        return float(raw) if raw else default
    except ValueError as exc:
        raise SsoSettingError(f"{name} must be a number of seconds, got {raw!r}") from exc


def _env_url(name: str, env: Mapping[str, str]) -> str:
    value = _env(name, env)
    if value and not value.startswith(("https://", "http://")):
        raise SsoSettingError(f"{name} must be an http(s) URL, got {value!r}")
    return value


def _endpoints(env: Mapping[str, str]) -> dict[str, Any]:
    missing = [name for name in _REQUIRED if not _env(name, env)]
    if missing:
        raise SsoSettingError(f"AGENTOPS_OIDC_CLIENT_ID is set, so single sign-on is on; it also "
                              f"needs {', '.join(missing)} (docs/sso.md)")
    return {
        "OIDC_OP_AUTHORIZATION_ENDPOINT": _env_url("AGENTOPS_OIDC_AUTHORIZATION_ENDPOINT", env),
        "OIDC_OP_TOKEN_ENDPOINT": _env_url("AGENTOPS_OIDC_TOKEN_ENDPOINT", env),
        # Optional: without it the claims come from the ID token alone (Entra ID's groups do).
        "OIDC_OP_USER_ENDPOINT": _env_url("AGENTOPS_OIDC_USERINFO_ENDPOINT", env),
        "OIDC_OP_JWKS_ENDPOINT": _env_url("AGENTOPS_OIDC_JWKS_URI", env),
        "AGENTOPS_OIDC_END_SESSION_ENDPOINT": _env_url("AGENTOPS_OIDC_END_SESSION_ENDPOINT", env),
    }


def sso_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """Return the settings single sign-on needs for ``env``; only the "off" values when unset."""
    client_id = _env("AGENTOPS_OIDC_CLIENT_ID", env)
    values: dict[str, Any] = {
        "OIDC_RP_CLIENT_ID": client_id,
        # mozilla-django-oidc's request view reads it before ours can answer 404 when off.
        "OIDC_OP_AUTHORIZATION_ENDPOINT": "",
        "AGENTOPS_OIDC_PASSWORD_LOGIN": _env_bool("AGENTOPS_OIDC_PASSWORD_LOGIN", env, True),
    }
    if not client_id:
        return values
    return {**values, **_endpoints(env), **_identity(env), **_library(env)}


def _identity(env: Mapping[str, str]) -> dict[str, Any]:
    issuer = _env_url("AGENTOPS_OIDC_ISSUER", env)
    return {
        "AGENTOPS_OIDC_ISSUER": issuer,
        "AGENTOPS_OIDC_PROVIDER_NAME": _env("AGENTOPS_OIDC_PROVIDER_NAME", env,
                                            "single sign-on"),
        "AGENTOPS_OIDC_GROUPS_CLAIM": _env("AGENTOPS_OIDC_GROUPS_CLAIM", env, "groups"),
        "AGENTOPS_OIDC_USERNAME_CLAIM": _env("AGENTOPS_OIDC_USERNAME_CLAIM", env,
                                             "preferred_username"),
        "AGENTOPS_OIDC_ROLE_MAP": role_map_from_setting(_env("AGENTOPS_OIDC_ROLE_MAP", env)),
        "AGENTOPS_OIDC_LEEWAY_S": _env_float("AGENTOPS_OIDC_LEEWAY_S", env, 30.0),
    }


def _library(env: Mapping[str, str]) -> dict[str, Any]:
    algo = _env("AGENTOPS_OIDC_SIGN_ALGO", env, "RS256")
    # mozilla-django-oidc looks up the provider's key for RS* and ES* only.
    if algo not in ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512"):
        raise SsoSettingError("AGENTOPS_OIDC_SIGN_ALGO must be the algorithm the provider "
                              f"signs ID tokens with: RS256/384/512 or ES256/384/512, got {algo!r}")
    return {
        "OIDC_RP_CLIENT_SECRET": _env("AGENTOPS_OIDC_CLIENT_SECRET", env),
        "OIDC_RP_SIGN_ALGO": algo,
        "OIDC_RP_SCOPES": _env("AGENTOPS_OIDC_SCOPES", env, "openid email profile"),
        "OIDC_USE_PKCE": _env_bool("AGENTOPS_OIDC_PKCE", env, True),
        # client_secret_basic (Okta's default) instead of the secret in the request body.
        "OIDC_TOKEN_USE_BASIC_AUTH": _env_bool("AGENTOPS_OIDC_BASIC_AUTH", env, False),
        "OIDC_TIMEOUT": _env_float("AGENTOPS_OIDC_TIMEOUT_S", env, 10.0),
        "OIDC_AUTHENTICATION_CALLBACK_URL": "console:oidc_callback",
        # The ID token is kept for the provider's end-session endpoint (its id_token_hint).
        "OIDC_STORE_ID_TOKEN": True,
        "AXES_WHITELIST_CALLABLE": "agentops.sso_backend.axes_exempt",
    }


def apply(settings_globals: dict[str, Any], env: Mapping[str, str]) -> None:
    """Set the single sign-on settings in ``settings_globals`` (adds the backend when on)."""
    values = sso_settings(env)
    settings_globals.update(values)
    backends = list(settings_globals["AUTHENTICATION_BACKENDS"])
    if values["OIDC_RP_CLIENT_ID"] and BACKEND not in backends:
        settings_globals["AUTHENTICATION_BACKENDS"] = backends + [BACKEND]
