"""Authentication: bearer API keys, the console session with CSRF, role checks, rate limits."""
from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.test import Client

from agentops import clock
from approvals.apikeys import apikey_create, apikey_revoke
from approvals.models import ApiKey
from tests.api.conftest import ApiClient, assert_error


def test_no_credentials_is_401_with_bearer_challenge(anonymous):
    response = anonymous.get("/api/runs")
    assert_error(response, 401, "unauthenticated")
    assert response["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize("header", ["Bearer ao_nope_nope", "Bearer ", "Basic dXNlcjpwdw==",
                                    "Bearer " + "x" * 5000])
def test_wrong_key_is_401(db, header):
    response = Client(headers={"Authorization": header}).get("/api/runs")
    assert_error(response, 401, "unauthenticated")


def test_a_valid_key_authenticates_and_stamps_last_use(viewer):
    key = ApiKey.objects.get(user=viewer.user)
    assert key.last_used_at is None
    assert viewer.get("/api/runs").status_code == 200
    key.refresh_from_db()
    assert key.last_used_at is not None


def test_the_key_is_stored_only_as_a_hash(make_user):
    user = make_user("keyholder", "viewers")
    key, raw = apikey_create(user=user, name="ci")
    assert raw.startswith(key.prefix)
    assert raw not in {key.key_hash, key.prefix}
    assert not ApiKey.objects.filter(key_hash=raw).exists()


def test_a_revoked_key_is_refused(viewer):
    key = ApiKey.objects.get(user=viewer.user)
    apikey_revoke(user=viewer.user, key_id=key.pk)
    assert_error(viewer.get("/api/runs"), 401)


def test_an_inactive_users_key_is_refused(viewer):
    User.objects.filter(pk=viewer.user.pk).update(is_active=False)
    assert_error(viewer.get("/api/runs"), 401)


def test_a_user_without_a_role_is_403(client_for):
    nobody = client_for()
    error = assert_error(nobody.get("/api/runs"), 403, "forbidden")
    assert "see runs" in error["message"]


def test_session_reads_work_without_csrf_token(make_user):
    user = make_user("console-user", "viewers")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.get("/api/runs").status_code == 200


def test_session_writes_need_the_csrf_token(make_user):
    user = make_user("console-writer", "viewers")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post("/api/keys", {"name": "x"}, content_type="application/json")
    assert_error(response, 403, "forbidden")
    client.get("/api/runs")  # any page would do; the test client needs a token cookie
    token = _csrf_token(client)
    response = client.post("/api/keys", {"name": "x", "team": "default", "role": "viewers"},
                           content_type="application/json", headers={"X-CSRFToken": token})
    assert response.status_code == 201


def _csrf_token(client: Client) -> str:
    from django.middleware.csrf import _get_new_csrf_string, _mask_cipher_secret

    secret = _get_new_csrf_string()
    client.cookies["csrftoken"] = secret
    return _mask_cipher_secret(secret)


def test_a_bad_key_with_no_session_is_401_not_csrf_403(db):
    client = Client(enforce_csrf_checks=True, headers={"Authorization": "Bearer ao_x_y"})
    response = client.post("/api/keys", {"name": "x"}, content_type="application/json")
    assert_error(response, 401)


def test_last_use_is_not_rewritten_on_every_call(viewer):
    key = ApiKey.objects.get(user=viewer.user)
    viewer.get("/api/runs")
    key.refresh_from_db()
    first = key.last_used_at
    viewer.get("/api/runs")
    key.refresh_from_db()
    assert key.last_used_at == first
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=clock.now() - dt.timedelta(minutes=5))
    viewer.get("/api/runs")
    key.refresh_from_db()
    assert key.last_used_at > first - dt.timedelta(seconds=1)


def test_too_many_calls_are_429_with_retry_after(viewer, settings):
    settings.AGENTOPS_API_RATE = "3/m"
    statuses = [viewer.get("/api/runs").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    response = viewer.get("/api/runs")
    assert_error(response, 429, "rate_limited")
    assert int(response["Retry-After"]) > 0


def test_the_rate_limit_is_per_user(client_for, settings):
    settings.AGENTOPS_API_RATE = "1/m"
    first, second = client_for("viewers", name="a"), client_for("viewers", name="b")
    assert first.get("/api/runs").status_code == 200
    assert second.get("/api/runs").status_code == 200
    assert first.get("/api/runs").status_code == 429


def test_bearer_client_class_sends_key(viewer):
    assert isinstance(viewer, ApiClient) and viewer.key.startswith("ao_")


def test_the_api_docs_are_behind_login(anonymous, viewer, settings):
    """/api/docs and /api/openapi.json were public; now they need a session or an API key."""
    response = anonymous.get("/api/openapi.json")
    assert response.status_code == 401 and "paths" not in response.content.decode()
    docs = anonymous.get("/api/docs")
    assert docs.status_code == 302 and docs.url.startswith("/login")
    assert viewer.get("/api/openapi.json").json()["paths"]
    assert viewer.get("/api/docs").status_code == 200
    settings.AGENTOPS_API_DOCS_PUBLIC = True
    assert anonymous.get("/api/openapi.json").status_code == 200


def test_the_api_docs_for_a_console_session(make_user):
    from django.test import Client

    client = Client()
    client.force_login(make_user("docs-reader", "viewers"))
    assert client.get("/api/openapi.json").status_code == 200
