"""Single sign-on through the real callback against a loopback provider (tests/oidc_bad_provider):
a good ID token signs the person in with the roles their groups claim; a forged, altered,
expired, foreign or unsigned one is refused with the reason on the login page."""
from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import requests
import pytest
from django.contrib.auth.models import User

from agentops.settings_sso import sso_settings
from approvals.models import Intervention
from approvals.roles import user_roles
from runs.models import Team
from tests.console_factories import PASSWORD, make_user
from tests.oidc_bad_provider import bad_provider, provider_env

ROOT = Path(__file__).resolve().parents[1]
ROLE_MAP = ('{"agentops-operators": "operators", "agentops-admins": "admins", '
            '"agentops-viewers": "viewers", "payments-ops": "payments:operators", '
            '"payments-support": "payments:support", "research": ["research:viewers", '
            '"ghosts:admins"]}')


@pytest.fixture
def provider(settings, db):
    """A loopback provider, and AgentOps configured to sign in through it."""
    with bad_provider() as prov:
        for name, value in sso_settings(provider_env(prov.base_url,
                                                     AGENTOPS_OIDC_ROLE_MAP=ROLE_MAP)).items():
            setattr(settings, name, value)
        settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS,
                                            "agentops.sso_backend.SsoBackend"]
        yield prov


def sign_in(client) -> str:
    """Press "Sign in with" and follow the provider back; return where the callback sends us."""
    start = client.get("/oidc/authenticate/")
    assert start.status_code == 302, start
    back = requests.get(start["Location"], allow_redirects=False, timeout=10)
    assert back.status_code == 302
    callback = urlsplit(back.headers["location"])
    done = client.get(f"{callback.path}?{callback.query}")
    assert done.status_code == 302, done
    return done["Location"]


def test_the_login_page_offers_the_provider_beside_the_password(client, provider):
    page = client.get("/login/").content.decode()
    assert "Sign in with Example SSO" in page and 'name="password"' in page


def test_a_good_id_token_signs_in_with_the_role_the_groups_claim_gives(client, provider):
    provider.claims["groups"] = ["agentops-operators", "unmapped-group"]
    assert sign_in(client) == "/"
    user = User.objects.get(username="dana")
    assert user.email == "dana@example.com" and not user.has_usable_password()
    assert user_roles(user) == {"operators"}
    page = client.get("/")
    assert page.status_code == 200 and "operators" in page.content.decode()


def test_the_client_secret_goes_in_the_body_or_a_basic_header(client, provider, settings):
    sign_in(client)
    assert provider.client_auth == ("", "not-checked-by-this-provider")
    client.post("/logout/")
    settings.OIDC_TOKEN_USE_BASIC_AUTH = sso_settings(provider_env(
        provider.base_url, AGENTOPS_OIDC_BASIC_AUTH="1"))["OIDC_TOKEN_USE_BASIC_AUTH"]
    sign_in(client)
    header, body_secret = provider.client_auth
    assert header.startswith("Basic ") and body_secret == ""


def test_a_changed_claim_changes_the_role_at_the_next_sign_in(client, provider):
    provider.claims["groups"] = ["agentops-admins"]
    sign_in(client)
    client.post("/logout/")
    provider.claims["groups"] = ["agentops-viewers"]
    sign_in(client)
    user = User.objects.get(username="dana")
    assert user_roles(user) == {"viewers"}
    audit = Intervention.objects.filter(action="user.sso_roles").order_by("id")
    assert [row.data for row in audit] == [{"added": ["admins"], "removed": []},
                                           {"added": ["viewers"], "removed": ["admins"]}]


def test_team_roles_follow_the_claim_and_a_removed_group_removes_the_role(client, provider):
    payments = Team.objects.create(slug="payments", name="Payments")
    research = Team.objects.create(slug="research", name="Research")
    provider.claims["groups"] = ["payments-support", "payments-ops", "research"]
    sign_in(client)
    user = User.objects.get(username="dana")
    # operators wins over support in one team; "ghosts" does not exist and gives nothing
    assert user_roles(user, payments) == {"operators"}
    assert user_roles(user, research) == {"viewers"} and user_roles(user, None) == {
        "operators", "viewers"}
    assert client.get("/").status_code == 200
    client.post("/logout/")
    provider.claims["groups"] = ["payments-support"]
    sign_in(client)
    user = User.objects.get(username="dana")
    assert user_roles(user, payments) == {"support"} and user_roles(user, research) == set()
    changes = [row.data for row in Intervention.objects.filter(action="team.membership")
               .order_by("id")]
    assert changes[-2:] == [
        {"user": "dana", "team": "research", "from": "viewers", "to": None},
        {"user": "dana", "team": "payments", "from": "operators", "to": "support"}]


@pytest.mark.parametrize("mode, reason", [
    ("forged", "signature does not verify"),
    ("altered", "signature does not verify"),
    ("expired", "has expired"),
    ("wrong_audience", "Audience doesn"),
    ("wrong_issuer", "Invalid issuer"),
    ("unsigned", "Could not find a valid JWKS"),
])
def test_a_bad_id_token_is_refused(client, provider, mode, reason):
    provider.claims["groups"] = ["agentops-admins"]
    provider.mode = mode
    assert sign_in(client) == "/login/"
    assert provider.token_requests == 1  # the callback did exchange the code
    page = client.get("/login/").content.decode()
    assert "Sign-in with Example SSO failed" in page and reason in page
    assert not User.objects.filter(username="dana").exists()
    assert client.get("/").status_code == 302  # still signed out


def test_someone_with_no_mapped_group_is_told_they_have_no_role(client, provider):
    provider.claims["groups"] = ["marketing"]
    sign_in(client)
    page = client.get("/")
    assert page.status_code == 403
    assert "You have no role here" in page.content.decode()
    assert "Example SSO" in page.content.decode()
    assert 'href="/approvals/"' not in page.content.decode()  # no links that would be refused


def test_a_local_password_account_is_not_taken_over(client, provider):
    make_user("dana", "admins")
    provider.claims["groups"] = ["agentops-viewers"]
    assert sign_in(client) == "/login/"
    assert "does not take it over" in client.get("/login/").content.decode()
    assert user_roles(User.objects.get(username="dana")) == {"admins"}


def test_sign_out_ends_the_session_at_the_provider_too(client, provider):
    sign_in(client)
    out = client.post("/logout/")
    assert out.status_code == 200  # a page that moves on: CSP's form-action forbids a redirect
    href = re.search(r'content="0;url=([^"]+)"', out.content.decode()).group(1)
    end = urlsplit(html.unescape(href))
    assert f"{end.scheme}://{end.netloc}{end.path}" == f"{provider.base_url}/logout"
    assert "id_token_hint=" in end.query and "post_logout_redirect_uri=" in end.query
    assert client.get("/").status_code == 302


def test_password_login_still_works_and_can_be_turned_off(client, provider, settings):
    make_user("ops", "operators")
    ok = client.post("/login/", {"username": "ops", "password": PASSWORD})
    assert ok.status_code == 302 and ok["Location"] == "/"
    client.post("/logout/")
    settings.AGENTOPS_OIDC_PASSWORD_LOGIN = False
    page = client.get("/login/").content.decode()
    assert "Sign in with Example SSO" in page and 'name="password"' not in page
    refused = client.post("/login/", {"username": "ops", "password": PASSWORD}, follow=True)
    assert "Password sign-in is off" in refused.content.decode()
    assert client.get("/").status_code == 302


def test_sso_urls_answer_404_when_it_is_off(client, db):
    assert client.get("/oidc/authenticate/").status_code == 404
    assert "Sign in with" not in client.get("/login/").content.decode()


@pytest.mark.parametrize("extra, message", [
    ({"AGENTOPS_OIDC_ROLE_MAP": '{"ops": "operator"}'},
     "AGENTOPS_OIDC_ROLE_MAP['ops']: 'operator' names no role"),
    ({"AGENTOPS_OIDC_ROLE_MAP": '{"ops": "pay ments:operators"}'},
     "AGENTOPS_OIDC_ROLE_MAP['ops']: 'pay ments:operators' has no valid team slug"),
    ({"AGENTOPS_OIDC_ROLE_MAP": '["ops"]'}, "AGENTOPS_OIDC_ROLE_MAP must be a JSON object"),
    ({"AGENTOPS_OIDC_JWKS_URI": ""}, "it also needs AGENTOPS_OIDC_JWKS_URI"),
    ({"AGENTOPS_OIDC_SIGN_ALGO": "HS256"}, "AGENTOPS_OIDC_SIGN_ALGO must be the algorithm"),
])
def test_a_bad_setting_stops_the_process_naming_it(extra, message):
    env = {**os.environ, **provider_env("http://127.0.0.1:9", **extra)}
    proc = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT,
                          env={**env, "DJANGO_SETTINGS_MODULE": "agentops.settings"},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert message in proc.stderr


def test_refused_callbacks_do_not_lock_single_sign_on_out(client, provider, settings):
    settings.AXES_FAILURE_LIMIT = 3
    provider.claims["groups"] = ["agentops-viewers"]
    provider.mode = "forged"
    for _ in range(4):
        assert sign_in(client) == "/login/"
    provider.mode = "good"
    assert sign_in(client) == "/"
    client.post("/logout/")
    make_user("ops", "operators")
    for _ in range(3):  # password guessing is still throttled
        client.post("/login/", {"username": "ops", "password": "wrong"})
    assert client.post("/login/", {"username": "ops", "password": PASSWORD}).status_code == 429
