"""The console's API keys page: team, role, expiry, last use; create, rotate and revoke."""
from __future__ import annotations

import re

import pytest
from django.test import Client

from approvals.models import ApiKey, Intervention
from approvals.users import membership_set
from runs.models import Team
from tests.api.conftest import ApiClient
from tests.console_factories import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def ann():
    """A signed-in operator of team payments (no installation-wide role)."""
    user = make_user("ann")
    membership_set(user=user, team=Team.objects.create(slug="payments", name="Payments"),
                   role="operators")
    client = Client()
    client.force_login(user)
    return client


def _secret(html: str) -> str:
    return re.search(r"<pre class=\"mono\" data-secret>([^<]+)</pre>", html).group(1)


def test_create_shows_the_secret_once_and_the_list_shows_team_role_expiry_and_last_use(ann):
    page = ann.get("/keys/").content.decode()
    assert "No keys yet." in page and '<option value="default"' not in page
    team = Team.objects.get(slug="payments")
    response = ann.post("/keys/", {"name": "deploy bot", "team": team.pk, "role": "operators",
                                   "expires_days": "30"})
    html = response.content.decode()
    raw = _secret(html)
    key = ApiKey.objects.get()
    assert 'data-last-used>never' in html
    assert ApiClient(raw).get("/api/runs").status_code == 200
    html = ann.get("/keys/").content.decode()
    row = html[html.index(f'data-key="{key.pk}"'):]
    row = row[:row.index("</tr>")]
    assert "deploy bot" in row and "payments" in row and "operators" in row
    assert key.expires_at.strftime("%Y-%m-%d") in row
    assert 'data-last-used>' in row and "never" not in row.split("data-last-used>")[1][:20]
    again = ann.get("/keys/").content.decode()
    assert raw not in again and "data-secret" not in again


def test_a_role_above_yours_is_refused_on_the_form(ann):
    team = Team.objects.get(slug="payments")
    response = ann.post("/keys/", {"name": "x", "team": team.pk, "role": "admins"})
    assert response.status_code == 422
    assert "you hold operators in team payments" in response.content.decode()
    assert not ApiKey.objects.exists()


def test_rotate_shows_a_new_secret_and_the_old_one_stops(ann):
    team = Team.objects.get(slug="payments")
    old = _secret(ann.post("/keys/", {"name": "ci", "team": team.pk,
                                      "role": "viewers"}).content.decode())
    key = ApiKey.objects.get()
    html = ann.post(f"/keys/{key.pk}/rotate/", {"grace_s": "0"}).content.decode()
    new = _secret(html)
    assert new != old and "Key ci rotated" in html
    assert ApiClient(old).get("/api/runs").status_code == 401
    assert ApiClient(new).get("/api/runs").status_code == 200
    assert Intervention.objects.filter(action="apikey.rotate", team=team).count() == 1
    ann.post(f"/keys/{key.pk}/revoke/")
    assert ApiClient(new).get("/api/runs").status_code == 401
    assert "revoked" in ann.get("/keys/").content.decode()
    other = Client()
    other.force_login(make_user("bob", "admins"))
    assert other.post(f"/keys/{key.pk}/rotate/", {"grace_s": "0"}).status_code == 404


def test_someone_in_several_teams_picks_the_key_team_rather_than_getting_the_first(ann):
    Team.objects.create(slug="support-desk", name="Support desk")
    one_team = ann.get("/keys/").content.decode()
    assert "choose a team" not in one_team  # ann is in payments only: it is picked for her
    root = Client()
    root.force_login(make_user("root", "admins"))
    several = root.get("/keys/").content.decode()
    assert '<option value="" selected>choose a team</option>' in several
    missing = root.post("/keys/", {"name": "x", "role": "viewers"})
    assert missing.status_code == 422 and not ApiKey.objects.exists()
