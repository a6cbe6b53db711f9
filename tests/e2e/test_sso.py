"""Single sign-on in a real browser through a real OpenID provider: django-oauth-toolkit in a
second Django process (tests/oidc_provider), its own SQLite file, RS256 ID tokens.

The person signs in on the provider's form and lands on the console with the role their
groups claim gives; their groups change at the provider; after signing out (here and at the
provider) and in again, their role has changed.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from agentops.settings_sso import BACKEND, sso_settings
from runs.models import Team
from tests.e2e.conftest import shot
from tests.notify_servers import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True, serialized_rollback=True)]

ROOT = Path(__file__).resolve().parents[2]
MANAGE = [sys.executable, str(ROOT / "tests" / "oidc_provider" / "manage.py")]
CLIENT_ID, SECRET = "agentops-console", "s3cret-for-the-test-provider-only"
ROLE_MAP = '{"agentops-operators": "operators", "agentops-viewers": "viewers", "payments-support": "payments:support"}'


class Provider:
    """The provider process and the commands that change its users."""

    def __init__(self, tmp: Path) -> None:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (tmp / "key.pem").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
        self.env = {**os.environ, "OIDC_PROVIDER_DB": str(tmp / "provider.sqlite3"),
                    "OIDC_PROVIDER_KEY": str(tmp / "key.pem"), "PYTHONUNBUFFERED": "1"}
        self.env.pop("DJANGO_SETTINGS_MODULE", None)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / "provider.log"
        self.proc: subprocess.Popen | None = None

    def manage(self, *args: str) -> None:
        """Run one of the provider's manage.py commands against its database."""
        subprocess.run([*MANAGE, *args], cwd=ROOT, env=self.env, check=True,
                       capture_output=True, timeout=120)

    def start(self) -> None:
        """Serve the provider and wait until its discovery document answers."""
        self.proc = subprocess.Popen(
            [*MANAGE, "runserver", f"127.0.0.1:{self.port}", "--noreload"], cwd=ROOT,
            env=self.env, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.url}/o/.well-known/openid-configuration",
                                timeout=2).ok:
                    return
            except requests.ConnectionError:
                time.sleep(0.2)
        raise AssertionError(f"the provider did not start: {self.log.read_text()[-2000:]}")

    def env_for_agentops(self) -> dict[str, str]:
        """The AGENTOPS_OIDC_* settings an operator would write for this provider."""
        return {
            "AGENTOPS_OIDC_CLIENT_ID": CLIENT_ID, "AGENTOPS_OIDC_CLIENT_SECRET": SECRET,
            "AGENTOPS_OIDC_ISSUER": f"{self.url}/o",
            "AGENTOPS_OIDC_AUTHORIZATION_ENDPOINT": f"{self.url}/o/authorize/",
            "AGENTOPS_OIDC_TOKEN_ENDPOINT": f"{self.url}/o/token/",
            "AGENTOPS_OIDC_USERINFO_ENDPOINT": f"{self.url}/o/userinfo/",
            "AGENTOPS_OIDC_JWKS_URI": f"{self.url}/o/.well-known/jwks.json",
            "AGENTOPS_OIDC_END_SESSION_ENDPOINT": f"{self.url}/o/logout/",
            "AGENTOPS_OIDC_PROVIDER_NAME": "Example IdP",
            "AGENTOPS_OIDC_ROLE_MAP": ROLE_MAP,
        }


@pytest.fixture
def provider(live_server, settings, tmp_path) -> Iterator[Provider]:
    """A running provider with AgentOps registered and dana in agentops-operators."""
    prov = Provider(tmp_path)
    prov.manage("migrate", "--verbosity", "0")
    prov.manage("oidc_client", CLIENT_ID, SECRET,
                "--redirect-uri", f"{live_server.url}/oidc/callback/",
                "--post-logout-uri", f"{live_server.url}/login/")
    prov.manage("oidc_user", "dana", "--password", "dana-pw-1234", "--email",
                "dana@example.com", "--groups", "agentops-operators,payments-support")
    try:
        prov.start()
        for name, value in sso_settings(prov.env_for_agentops()).items():
            setattr(settings, name, value)
        settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, BACKEND]
        yield prov
    finally:
        if prov.proc is not None:
            prov.proc.terminate()
            prov.proc.wait(timeout=10)


def _sign_in(page, live_server, provider) -> None:
    page.goto(f"{live_server.url}/login/")
    page.get_by_role("link", name="Sign in with Example IdP").click()
    page.wait_for_url(f"{provider.url}/accounts/login/**")
    page.fill("#idp-username", "dana")
    page.fill("#idp-password", "dana-pw-1234")
    page.click("#idp-submit")
    page.wait_for_url(f"{live_server.url}/")


def _roles(page) -> list[str]:
    return page.locator("header .who .role").all_inner_texts()


def test_the_role_follows_the_providers_groups_at_each_sign_in(browser, live_server, provider):
    Team.objects.get_or_create(slug="payments", defaults={"name": "Payments"})
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)

    page.goto(f"{live_server.url}/login/")
    shot(page, "sso_login")
    _sign_in(page, live_server, provider)
    assert page.locator("header .who .user").inner_text() == "dana"
    assert _roles(page) == ["all teams: operators", "payments: support"]
    shot(page, "sso_signed_in_operator")

    provider.manage("oidc_user", "dana", "--groups", "agentops-viewers")
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(f"{live_server.url}/login/")  # back from the provider's end-session
    page.goto(f"{live_server.url}/")
    page.wait_for_url(f"{live_server.url}/login/**")

    _sign_in(page, live_server, provider)  # the provider asks for the password again
    assert _roles(page) == ["viewers"]
    shot(page, "sso_signed_in_viewer")

    provider.manage("oidc_user", "dana", "--groups", "marketing")
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(f"{live_server.url}/login/")
    page.get_by_role("link", name="Sign in with Example IdP").click()
    page.fill("#idp-username", "dana")
    page.fill("#idp-password", "dana-pw-1234")
    page.click("#idp-submit")
    page.get_by_role("heading", name="You have no role here").wait_for()
    shot(page, "sso_no_role")
    context.close()
