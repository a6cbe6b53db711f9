"""/healthz, /readyz and the /metrics access rules."""
from __future__ import annotations

import re

import datetime as dt

import pytest

from agentops import clock
from runs.models import WorkerHeartbeat

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.health_urls")]


def _beat(age_s: float, name: str = "worker-1") -> None:
    seen = clock.now() - dt.timedelta(seconds=age_s)
    WorkerHeartbeat.objects.update_or_create(name=name, defaults={"seen_at": seen, "pid": 1})


def test_healthz_answers_without_workers(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_503_with_a_reason_when_no_worker_ever_reported(client):
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unready"
    assert body["checks"]["database"]["ok"] and body["checks"]["migrations"]["ok"]
    assert body["checks"]["worker_heartbeat"]["ok"] is False
    assert any("manage.py agentops worker" in reason for reason in body["reasons"])


def test_readyz_is_503_when_the_newest_heartbeat_is_stale(client, settings):
    settings.AGENTOPS_HEARTBEAT_MAX_AGE_S = 30
    _beat(age_s=45)
    response = client.get("/readyz")
    assert response.status_code == 503
    # 45 s old when written; a loaded machine may take a second more to answer.
    assert re.search(r"No worker heartbeat for 4[5-7]s \(limit 30s\)",
                     response.json()["reasons"][0])


def test_readyz_is_200_when_a_worker_reported_recently(client, settings):
    settings.AGENTOPS_HEARTBEAT_MAX_AGE_S = 30
    _beat(age_s=45, name="old")
    _beat(age_s=3, name="fresh")
    response = client.get("/readyz")
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "ready"
    assert response.json()["reasons"] == []
    assert response["Cache-Control"].startswith("max-age=0")


def test_metrics_refuses_an_address_outside_the_allow_list(client, settings):
    settings.AGENTOPS_METRICS_ALLOW = ["10.0.0.0/8"]
    settings.AGENTOPS_METRICS_TOKEN = ""
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.5").status_code == 403
    allowed = client.get("/metrics", REMOTE_ADDR="10.1.2.3")
    assert allowed.status_code == 200
    assert allowed["Content-Type"].startswith("text/plain")


def test_metrics_default_allows_only_loopback(client, settings):
    del settings.AGENTOPS_METRICS_ALLOW  # not configured: loopback only
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="203.0.113.9").status_code == 403


def test_metrics_accepts_the_bearer_token_from_any_address(client, settings):
    settings.AGENTOPS_METRICS_ALLOW = []
    settings.AGENTOPS_METRICS_TOKEN = "s3cret-token"
    outside = {"REMOTE_ADDR": "203.0.113.9"}
    assert client.get("/metrics", **outside).status_code == 403
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope", **outside)
    assert wrong.status_code == 403
    right = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token", **outside)
    assert right.status_code == 200
    assert b"agentops_runs" in right.content
