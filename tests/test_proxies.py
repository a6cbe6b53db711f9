"""Who the client is behind proxies: login throttling and the /metrics allow-list agree.

An appending proxy (nginx ``$proxy_add_x_forwarded_for``, AWS ALB...) keeps what the client
sent and adds the address it saw: ``X-Forwarded-For: <anything the client wrote>, <client>``.
"""
from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.test_security import _with_axes

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.health_urls")]
PROXY = "10.0.0.5"
ATTACKER = "203.0.113.9"


def _via_proxy(client: Client, password: str, spoof: str, real: str = ATTACKER):
    return client.post("/login/", {"username": "ops", "password": password},
                       REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=f"{spoof}, {real}")


@pytest.fixture(params=["AGENTOPS_PROXY_COUNT=1", "AGENTOPS_TRUSTED_PROXIES=1",
                        "AGENTOPS_TRUSTED_PROXIES=10.0.0.0/8"])
def behind_proxy(request, settings, tmp_path, monkeypatch):
    """Login throttling on, behind one appending proxy configured in each supported way."""
    name, value = request.param.split("=")
    monkeypatch.setenv(name, value)
    with _with_axes(settings, tmp_path, debug=True):
        get_user_model().objects.create_user("ops", password="right-password-123")
        yield settings


def test_twelve_wrong_passwords_with_a_fresh_spoofed_address_each_lock_the_account(
        client, behind_proxy):
    statuses = [_via_proxy(client, "wrong", spoof=f"198.18.0.{i}").status_code
                for i in range(12)]
    assert 429 in statuses and statuses.index(429) == 4
    assert _via_proxy(client, "right-password-123", spoof="198.18.1.1").status_code == 429


def test_the_lockout_is_the_attackers_not_everyone_behind_the_proxy(client, behind_proxy):
    for i in range(6):
        _via_proxy(client, "wrong", spoof=f"198.18.0.{i}")
    colleague = Client()
    response = _via_proxy(colleague, "right-password-123", spoof="", real="198.51.100.7")
    assert response.status_code == 302


def test_metrics_allow_list_reads_the_client_the_proxy_vouches_for(client, settings):
    settings.AGENTOPS_METRICS_TOKEN = ""
    settings.AGENTOPS_METRICS_ALLOW = ["192.0.2.10"]
    settings.AGENTOPS_TRUSTED_PROXIES = "10.0.0.0/8"
    allowed = client.get("/metrics", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="192.0.2.10")
    assert allowed.status_code == 200
    spoofed = client.get("/metrics", REMOTE_ADDR=PROXY,
                         HTTP_X_FORWARDED_FOR=f"192.0.2.10, {ATTACKER}")
    assert spoofed.status_code == 403
    direct = client.get("/metrics", REMOTE_ADDR=ATTACKER, HTTP_X_FORWARDED_FOR="192.0.2.10")
    assert direct.status_code == 403  # not from a trusted proxy: the header is ignored


def test_without_trusted_proxies_the_header_is_ignored(client, settings):
    settings.AGENTOPS_METRICS_TOKEN = ""
    settings.AGENTOPS_METRICS_ALLOW = ["127.0.0.1"]
    settings.AGENTOPS_TRUSTED_PROXIES = ""
    response = client.get("/metrics", REMOTE_ADDR=ATTACKER, HTTP_X_FORWARDED_FOR="127.0.0.1")
    assert response.status_code == 403


def test_a_bad_trusted_proxies_value_says_what_is_wrong(rf, settings):
    from agentops.proxies import client_ip

    settings.AGENTOPS_TRUSTED_PROXIES = "10.0.0.0/8,not-a-network"
    with pytest.raises(ValueError, match="'not-a-network' is neither a hop count"):
        client_ip(rf.get("/", REMOTE_ADDR=PROXY))
