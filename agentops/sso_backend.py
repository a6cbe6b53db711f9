"""The single sign-on backend: mozilla-django-oidc's code flow, with the ID token checks it
leaves out (issuer, audience, required expiry) and our users and roles (approvals.sso).

Any refusal (a forged or expired ID token, a provider error, a claim we cannot use) ends the
sign-in with no user; the reason is kept on the request for the login page to show.
"""
from __future__ import annotations

import logging
from typing import Any

import jwt
import requests
from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from approvals.errors import SignInRefused
from approvals.sso import ClaimNames, sso_user_sync

log = logging.getLogger(__name__)
REFUSAL_ATTR = "sso_refusal"
_REQUIRED_CLAIMS = ["exp", "iat", "iss", "aud", "sub"]


def axes_exempt(request: Any, credentials: dict | None = None) -> bool:
    """Tell django-axes not to count a sign-in without a username (the SSO callback).

    Its one-time code cannot be guessed, and a refused callback has no username, so counting
    it would lock every person behind the same address out of single sign-on.
    """
    return not (credentials or {}).get("username")


class SsoBackend(OIDCAuthenticationBackend):
    """Sign a person in from the provider's verified ID token (and userinfo, when configured)."""

    def authenticate(self, request: Any, **kwargs: Any) -> Any:
        """Return the signed-in user, or None with the reason on ``request``."""
        try:
            return super().authenticate(request, **kwargs)
        except SignInRefused as exc:
            reason = exc.message
        except (SuspiciousOperation, jwt.PyJWTError) as exc:
            reason = f"the provider's ID token was refused ({exc})"
        except (requests.RequestException, ValueError, KeyError) as exc:
            reason = f"the provider did not answer as expected ({type(exc).__name__}: {exc})"
        log.warning("single sign-on refused: %s", reason)
        setattr(request, REFUSAL_ATTR, reason)
        return None

    def get_payload_data(self, token: bytes, key: Any) -> dict[str, Any]:
        """Verify the ID token's signature, issuer, audience, expiry and issue time."""
        header = jwt.get_unverified_header(token)
        if header.get("alg") != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation(f"signed with {header.get('alg')!r}, not "
                                      f"{self.OIDC_RP_SIGN_ALGO}")
        try:
            payload = jwt.decode(
                token, key, algorithms=[self.OIDC_RP_SIGN_ALGO], audience=self.OIDC_RP_CLIENT_ID,
                issuer=settings.AGENTOPS_OIDC_ISSUER, leeway=settings.AGENTOPS_OIDC_LEEWAY_S,
                options={"require": _REQUIRED_CLAIMS})
        except jwt.ExpiredSignatureError as exc:
            raise SuspiciousOperation("the ID token has expired") from exc
        except jwt.InvalidSignatureError as exc:
            raise SuspiciousOperation("the ID token's signature does not verify") from exc
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"the ID token is not valid: {exc}") from exc
        audience = payload["aud"]
        if isinstance(audience, list) and len(audience) > 1 and \
                payload.get("azp") != self.OIDC_RP_CLIENT_ID:
            raise SuspiciousOperation("the ID token names several audiences and its azp is not "
                                      "this client")
        return payload

    def get_userinfo(self, access_token: str, id_token: str, payload: dict) -> dict[str, Any]:
        """Return the ID token's claims, updated from the userinfo endpoint when there is one."""
        if not self.OIDC_OP_USER_ENDPOINT:
            return dict(payload)
        userinfo = super().get_userinfo(access_token, id_token, payload)
        if str(userinfo.get("sub")) != str(payload["sub"]):
            raise SuspiciousOperation("the userinfo endpoint answered for another subject")
        return {**payload, **userinfo}

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict) -> Any:
        """Find or create the user the claims name and set their roles from the groups claim."""
        claims = self.get_userinfo(access_token, id_token, payload)
        names = ClaimNames(username=settings.AGENTOPS_OIDC_USERNAME_CLAIM,
                           groups=settings.AGENTOPS_OIDC_GROUPS_CLAIM,
                           role_map=settings.AGENTOPS_OIDC_ROLE_MAP)
        return sso_user_sync(claims=claims, names=names)
