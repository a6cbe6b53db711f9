"""A tiny OpenID provider on loopback whose token endpoint can hand out bad ID tokens.

It is a real HTTP server (authorize, token, userinfo, JWKS, end-session) speaking to the real
mozilla-django-oidc callback; only the ID token it signs is chosen by the test: good, forged
(signed by another key under the published kid), altered after signing, expired, for another
audience or issuer, or unsigned. Nothing of our sign-in path is mocked.
"""
from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

KID = "signing-key-1"
CLIENT_ID = "agentops-console"
MODES = ("good", "forged", "altered", "expired", "wrong_audience", "wrong_issuer", "unsigned")


class BadProvider:
    """The provider's state: its key, the claims it asserts and the kind of ID token to issue."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.mode = "good"
        self.claims: dict[str, Any] = {"sub": "u-1001", "preferred_username": "dana",
                                       "email": "dana@example.com", "groups": []}
        self.codes: dict[str, str] = {}  # code → nonce of the authorization request
        self.token_requests = 0
        self.client_auth: tuple[str, str] = ("", "")  # (Authorization header, body secret)

    def jwks(self) -> dict[str, Any]:
        """The published key set: only the real key."""
        jwk = RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": KID, "alg": "RS256", "use": "sig"}]}

    def id_token(self, nonce: str) -> str:
        """Sign an ID token for the current claims, spoiled as ``mode`` says."""
        now = int(time.time())
        claims = {**self.claims, "iss": self.base_url, "aud": CLIENT_ID, "iat": now,
                  "exp": now + 300, "nonce": nonce}
        if self.mode == "expired":
            claims.update(iat=now - 3600, exp=now - 600)
        if self.mode == "wrong_audience":
            claims["aud"] = "another-application"
        if self.mode == "wrong_issuer":
            claims["iss"] = "https://evil.example.com"
        if self.mode == "unsigned":
            return jwt.encode(claims, None, algorithm="none", headers={"kid": KID})
        key = self.other_key if self.mode == "forged" else self.key
        token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": KID})
        if self.mode == "altered":
            head, _, sig = token.split(".")
            body = jwt.utils.base64url_encode(json.dumps(
                {**claims, "groups": ["agentops-admins"]}).encode()).decode()
            token = f"{head}.{body}.{sig}"
        return token


def _handler(provider: BadProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, body: Any, status: int = 200) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path == "/authorize":
                code = secrets.token_urlsafe(16)
                provider.codes[code] = query.get("nonce", "")
                target = f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}"
                self.send_response(302)
                self.send_header("Location", target)
                self.end_headers()
            elif url.path == "/jwks":
                self._json(provider.jwks())
            elif url.path == "/userinfo":
                self._json({k: provider.claims[k] for k in ("sub", "preferred_username", "email",
                                                            "groups") if k in provider.claims})
            else:
                self._json({"error": "not_found"}, 404)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            provider.token_requests += 1
            provider.client_auth = (self.headers.get("Authorization", ""),
                                    form.get("client_secret", ""))
            nonce = provider.codes.pop(form.get("code", ""), None)
            if urlsplit(self.path).path != "/token" or nonce is None:
                self._json({"error": "invalid_grant"}, 400)
                return
            self._json({"access_token": secrets.token_urlsafe(16), "token_type": "Bearer",
                        "expires_in": 300, "id_token": provider.id_token(nonce)})

    return Handler


@contextmanager
def bad_provider() -> Iterator[BadProvider]:
    """Serve a BadProvider on a free loopback port for the block's duration."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    provider = BadProvider(f"http://127.0.0.1:{server.server_address[1]}")
    server.RequestHandlerClass = _handler(provider)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()


def provider_env(base_url: str, **extra: str) -> dict[str, str]:
    """The AGENTOPS_OIDC_* environment that points AgentOps at the provider at ``base_url``."""
    return {
        "AGENTOPS_OIDC_CLIENT_ID": CLIENT_ID,
        "AGENTOPS_OIDC_CLIENT_SECRET": "not-checked-by-this-provider",
        "AGENTOPS_OIDC_ISSUER": base_url,
        "AGENTOPS_OIDC_AUTHORIZATION_ENDPOINT": f"{base_url}/authorize",
        "AGENTOPS_OIDC_TOKEN_ENDPOINT": f"{base_url}/token",
        "AGENTOPS_OIDC_USERINFO_ENDPOINT": f"{base_url}/userinfo",
        "AGENTOPS_OIDC_JWKS_URI": f"{base_url}/jwks",
        "AGENTOPS_OIDC_END_SESSION_ENDPOINT": f"{base_url}/logout",
        "AGENTOPS_OIDC_PROVIDER_NAME": "Example SSO",
        "AGENTOPS_OIDC_LEEWAY_S": "5",
        **extra,
    }
