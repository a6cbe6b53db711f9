"""API keys: one team and one role each, never above the owner's; expiry, last use, rotation."""
from __future__ import annotations

import datetime as dt
import time

import pytest

from agentops import clock
from approvals.apikeys import apikey_verify
from approvals.models import ApiKey, Intervention
from approvals.roles import is_installation_admin, team_ids_for
from approvals.users import membership_set
from runs.models import Team
from tests.api.conftest import ApiClient, assert_error
from tests.clock_helpers import clock_reads

ADMIN_ONLY = "/api/admin/budget-policies"


@pytest.fixture
def teams(db):
    """Two teams besides the default one."""
    return (Team.objects.create(slug="payments", name="Payments"),
            Team.objects.create(slug="desk", name="Desk"))


@pytest.fixture
def member(make_user, teams):
    """A person holding no installation-wide role: admin in payments, viewer in desk."""
    user = make_user("ann")
    membership_set(user=user, team=teams[0], role="admins")
    membership_set(user=user, team=teams[1], role="viewers")
    session = ApiClient(None, user)
    session.force_login(user)
    return session


def _key(client: ApiClient, **body: object) -> dict:
    response = client.post_json("/api/keys", {"name": "ci", **body})
    assert response.status_code == 201, response.content
    return response.json()


def test_a_key_is_made_for_one_team_and_role_and_listed_without_its_secret(member):
    created = _key(member, team="payments", role="operators")
    assert created["key"].startswith(created["prefix"])
    assert (created["team"], created["role"], created["expires_at"]) == ("payments",
                                                                         "operators", None)
    listed = member.get("/api/keys").json()
    assert [(k["name"], k["team"], k["role"], k["last_used_at"]) for k in listed] == [
        ("ci", "payments", "operators", None)]
    assert created["key"] not in member.get("/api/keys").content.decode()
    row = Intervention.objects.get(action="apikey.create")
    assert row.team.slug == "payments" and row.data["role"] == "operators"


def test_a_key_above_the_owners_role_in_that_team_is_refused(member):
    error = assert_error(member.post_json("/api/keys", {"name": "x", "team": "desk",
                                                        "role": "operators"}),
                         422, "key_outranks_owner")
    assert "you hold viewers in team desk" in error["message"]
    error = assert_error(member.post_json("/api/keys", {"name": "x", "team": "default",
                                                        "role": "viewers"}),
                         422, "key_outranks_owner")
    assert "no role in team default" in error["message"]
    assert_error(member.post_json("/api/keys", {"name": "x", "team": "nope",
                                                "role": "viewers"}), 422, "invalid_api_key")
    assert_error(member.post_json("/api/keys", {"name": "x", "team": "desk"}), 422)
    assert not ApiKey.objects.exists()


def test_the_keys_role_caps_what_the_owner_could_do(member):
    admin_key = ApiClient(_key(member, team="payments", role="admins")["key"])
    viewer_key = ApiClient(_key(member, team="payments", role="viewers")["key"])
    assert admin_key.get(ADMIN_ONLY).status_code == 200
    assert viewer_key.get("/api/runs").status_code == 200
    assert_error(viewer_key.get(ADMIN_ONLY), 403, "forbidden")


def test_an_owner_who_loses_the_role_takes_it_from_the_key_at_once(member, teams):
    key = ApiClient(_key(member, team="payments", role="admins")["key"])
    assert key.get(ADMIN_ONLY).status_code == 200
    membership_set(user=member.user, team=teams[0], role="operators")
    assert_error(key.get(ADMIN_ONLY), 403, "forbidden")
    assert key.get("/api/runs").status_code == 200
    membership_set(user=member.user, team=teams[0], role=None)
    error = assert_error(key.get("/api/runs"), 401, "api_key_refused")
    assert "holds no role in team payments" in error["message"]


def test_a_key_of_an_installation_admin_holds_only_its_own_team(admin, teams):
    error = assert_error(admin.post_json("/api/keys", {"name": "x", "team": "desk",
                                                       "role": "viewers"}),
                         422, "key_outranks_owner")
    assert "no role in team desk" in error["message"]  # a key cannot mint keys elsewhere
    session = ApiClient(None, admin.user)
    session.force_login(admin.user)
    raw = _key(session, team="desk", role="admins")["key"]
    assert ApiClient(raw).get(ADMIN_ONLY).status_code == 200
    user = apikey_verify(raw=raw)
    assert team_ids_for(user) == frozenset({teams[1].pk})
    assert team_ids_for(admin.user) is None
    assert not is_installation_admin(user)


def test_an_expired_key_is_refused_saying_when(member):
    soon = clock.now() + dt.timedelta(seconds=1)
    created = _key(member, team="payments", role="viewers", expires_at=soon.isoformat())
    key = ApiClient(created["key"])
    assert key.get("/api/runs").status_code == 200
    time.sleep(1.1)
    error = assert_error(key.get("/api/runs"), 401, "api_key_refused")
    assert "expired at" in error["message"]
    assert dt.datetime.fromisoformat(error["details"]["expired_at"]) == soon
    assert_error(member.post_json("/api/keys", {"name": "x", "team": "payments",
                                                "role": "viewers",
                                                "expires_at": "2000-01-01T00:00:00Z"}),
                 422, "invalid_api_key")


def test_last_use_is_written_at_most_once_a_minute(member):
    key = ApiClient(_key(member, team="payments", role="viewers")["key"])
    start = clock.now()
    key.get("/api/runs")
    first = ApiKey.objects.get().last_used_at
    with clock_reads(lambda: start + dt.timedelta(seconds=30)):
        key.get("/api/runs")
    assert ApiKey.objects.get().last_used_at == first
    with clock_reads(lambda: start + dt.timedelta(seconds=90)):
        key.get("/api/runs")
    assert ApiKey.objects.get().last_used_at == start + dt.timedelta(seconds=90)


def test_rotation_gives_a_new_secret_and_the_old_one_stops_at_once(member):
    created = _key(member, team="payments", role="operators",
                   expires_at=(clock.now() + dt.timedelta(days=3)).isoformat())
    rotated = member.post_json(f"/api/keys/{created['id']}/rotate", {}).json()
    assert rotated["key"] != created["key"] and rotated["id"] == created["id"]
    kept = ("name", "team", "role", "expires_at")
    assert {k: rotated[k] for k in kept} == {k: created[k] for k in kept}
    assert ApiClient(rotated["key"]).get("/api/runs").status_code == 200
    assert_error(ApiClient(created["key"]).get("/api/runs"), 401, "unauthenticated")
    row = Intervention.objects.get(action="apikey.rotate")
    assert row.data["grace_s"] == 0 and row.actor == member.user


def test_rotation_with_a_grace_period_keeps_the_old_secret_until_it_ends(member):
    created = _key(member, team="payments", role="viewers")
    rotated = member.post_json(f"/api/keys/{created['id']}/rotate", {"grace_s": 60}).json()
    old, new = ApiClient(created["key"]), ApiClient(rotated["key"])
    assert old.get("/api/runs").status_code == 200
    assert new.get("/api/runs").status_code == 200
    with clock_reads(lambda: dt.datetime.now(dt.UTC) + dt.timedelta(seconds=61)):
        assert_error(old.get("/api/runs"), 401)
        assert new.get("/api/runs").status_code == 200
    assert_error(member.post_json(f"/api/keys/{created['id']}/rotate",
                                  {"grace_s": 30 * 86400}), 422)


def test_revoke_stops_the_key_and_one_may_not_touch_someone_elses(member, client_for):
    created = _key(member, team="payments", role="viewers")
    bob = client_for("admins", name="bob")
    assert_error(bob.delete(f"/api/keys/{created['id']}"), 404, "api_key_not_found")
    assert_error(bob.post_json(f"/api/keys/{created['id']}/rotate", {}), 404)
    revoked = member.delete(f"/api/keys/{created['id']}")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    assert_error(ApiClient(created["key"]).get("/api/runs"), 401)
    again = member.delete(f"/api/keys/{created['id']}").json()
    assert again["revoked_at"] == revoked.json()["revoked_at"]
    assert_error(member.post_json(f"/api/keys/{created['id']}/rotate", {}), 404)
    assert Intervention.objects.filter(action="apikey.revoke").count() == 1


def test_create_needs_a_name_and_a_role_and_anonymous_may_not_manage_keys(viewer, client_for,
                                                                          anonymous):
    assert_error(viewer.post_json("/api/keys", {"name": "", "team": "default",
                                                "role": "viewers"}), 422)
    assert_error(viewer.post_json("/api/keys", {}), 422)
    assert_error(client_for().post_json("/api/keys", {"name": "x", "team": "default",
                                                      "role": "viewers"}), 403)
    assert_error(anonymous.post_json("/api/keys", {"name": "x"}), 401)
    assert_error(anonymous.get("/api/keys"), 401)
