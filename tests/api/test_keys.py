"""API key management: create (shown once), list (no secrets), revoke."""
from __future__ import annotations

from tests.api.conftest import ApiClient, assert_error


def test_create_returns_the_key_once_and_it_works(viewer):
    response = viewer.post_json("/api/keys", {"name": "ci"})
    assert response.status_code == 201
    created = response.json()
    assert created["key"].startswith(created["prefix"])
    assert ApiClient(created["key"]).get("/api/runs").status_code == 200
    listed = viewer.get("/api/keys").json()
    assert {k["name"] for k in listed} == {"tests", "ci"}
    assert all("key" not in k and "key_hash" not in k for k in listed)
    assert created["key"] not in viewer.get("/api/keys").content.decode()


def test_revoke_stops_the_key(viewer):
    created = viewer.post_json("/api/keys", {"name": "temp"}).json()
    revoked = viewer.delete(f"/api/keys/{created['id']}")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    assert_error(ApiClient(created["key"]).get("/api/runs"), 401)
    again = viewer.delete(f"/api/keys/{created['id']}").json()
    assert again["revoked_at"] == revoked.json()["revoked_at"]


def test_one_may_not_revoke_or_see_someone_elses_key(client_for):
    alice, bob = client_for("viewers", name="alice"), client_for("admins", name="bob")
    alices = alice.get("/api/keys").json()[0]
    assert_error(bob.delete(f"/api/keys/{alices['id']}"), 404, "api_key_not_found")
    assert [k["id"] for k in bob.get("/api/keys").json()] != [alices["id"]]


def test_create_needs_a_name_and_a_role(viewer, client_for):
    assert_error(viewer.post_json("/api/keys", {"name": ""}), 422)
    assert_error(viewer.post_json("/api/keys", {}), 422)
    assert_error(client_for().post_json("/api/keys", {"name": "x"}), 403)


def test_anonymous_may_not_manage_keys(anonymous):
    assert_error(anonymous.post_json("/api/keys", {"name": "x"}), 401)
    assert_error(anonymous.get("/api/keys"), 401)
