"""The doctor: each configuration problem is found and named in plain words."""
from __future__ import annotations

import datetime as dt

import pytest
from cryptography.fernet import Fernet

from agentops import clock
from agentops.doctor import DEV_SECRET_KEY, doctor_checks
from runs.models import WorkerHeartbeat

pytestmark = pytest.mark.django_db


def _by_name() -> dict:
    return {c.name: c for c in doctor_checks()}


@pytest.fixture
def production(settings):
    """Settings of a correctly configured production host with a live worker."""
    settings.DEBUG = False
    settings.SECRET_KEY = "k" * 20 + "0123456789abcdefghijklmnopqrstuvwxyz"
    settings.ALLOWED_HOSTS = ["ops.example.com"]
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    settings.SECURE_HSTS_SECONDS = 31_536_000
    settings.REDIS_URL = ""
    settings.AGENTOPS_AGENTS = ["agentops.demo.agents"]
    settings.AGENTOPS_SEAL_KEYS = [Fernet.generate_key().decode()]
    settings.AGENTOPS_REDACTION_KEY = "r" * 40
    settings.AGENTOPS_CHECKPOINT_KEYS = ["c" * 40]
    settings.AGENTOPS_TRUSTED_PROXIES = "10.0.0.0/8"
    WorkerHeartbeat.objects.create(name="w1", seen_at=clock.now())
    return settings


def test_a_well_configured_host_passes_every_check(production):
    checks = doctor_checks()
    assert [c.name for c in checks if not c.ok] == [], [c.message for c in checks if not c.ok]
    assert {"database", "migrations", "secret_key", "key_ring", "allowed_hosts", "redis", "artifact_storage",
            "agents", "worker_heartbeat", "https", "metrics_access"} <= {c.name for c in checks}


def test_the_development_secret_key_is_refused_without_debug(production):
    production.SECRET_KEY = DEV_SECRET_KEY
    check = _by_name()["secret_key"]
    assert not check.ok and "set a long random SECRET_KEY" in check.message


def test_a_short_secret_key_is_refused_without_debug(production):
    production.SECRET_KEY = "short"
    assert "too short" in _by_name()["secret_key"].message


def test_allowed_hosts_star_is_refused_without_debug(production):
    production.ALLOWED_HOSTS = ["*"]
    check = _by_name()["allowed_hosts"]
    assert not check.ok and "ALLOWED_HOSTS" in check.message


def test_debug_allows_the_dev_key_and_any_host(production):
    production.DEBUG = True
    production.SECRET_KEY = DEV_SECRET_KEY
    production.ALLOWED_HOSTS = ["*"]
    checks = _by_name()
    assert checks["secret_key"].ok and checks["allowed_hosts"].ok


def test_security_settings_missing_in_production_are_named(production):
    production.SECURE_HSTS_SECONDS = 0
    check = _by_name()["https"]
    assert not check.ok and "SECURE_HSTS_SECONDS" in check.message
    assert "settings_security.apply" in check.message


def test_unreachable_redis_is_reported(production):
    production.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    check = _by_name()["redis"]
    assert not check.ok and "Redis does not answer" in check.message


def test_reachable_redis_passes_when_one_runs(production):
    import redis

    try:
        redis.Redis.from_url("redis://127.0.0.1:6379/0", socket_connect_timeout=1).ping()
    except redis.RedisError:
        pytest.skip("no Redis on 127.0.0.1:6379 here")
    production.REDIS_URL = "redis://127.0.0.1:6379/0"
    assert _by_name()["redis"].ok


def test_an_unimportable_agent_module_is_named(production):
    production.AGENTOPS_AGENTS = ["agentops.demo.agents", "no_such_package.agents"]
    check = _by_name()["agents"]
    assert not check.ok and "no_such_package.agents (ModuleNotFoundError" in check.message


def test_an_unwritable_artifact_storage_is_reported(production, tmp_path):
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    production.STORAGES = {
        **production.STORAGES,
        "artifacts": {"BACKEND": "django.core.files.storage.FileSystemStorage",
                      "OPTIONS": {"location": str(blocker / "artifacts")}},
    }
    check = _by_name()["artifact_storage"]
    assert not check.ok and "not writable" in check.message


def test_a_stale_worker_heartbeat_is_reported(production):
    production.AGENTOPS_HEARTBEAT_MAX_AGE_S = 10
    WorkerHeartbeat.objects.update(seen_at=clock.now() - dt.timedelta(minutes=5))
    check = _by_name()["worker_heartbeat"]
    assert not check.ok and "No worker heartbeat for 300s" in check.message


def test_a_malformed_metrics_allow_entry_is_reported(production):
    production.AGENTOPS_METRICS_ALLOW = ["10.0.0.0/8", "not-an-ip"]
    check = _by_name()["metrics_access"]
    assert not check.ok and "not-an-ip" in check.message


def test_missing_or_malformed_dedicated_keys_are_named(production):
    production.AGENTOPS_SEAL_KEYS = []
    production.AGENTOPS_REDACTION_KEY = ""
    production.AGENTOPS_CHECKPOINT_KEYS = []
    production.AGENTOPS_TRUSTED_PROXIES = "10.0.0.0/8,nope"
    message = _by_name()["key_ring"].message
    for name in ("AGENTOPS_SEAL_KEYS", "AGENTOPS_REDACTION_KEY", "AGENTOPS_CHECKPOINT_KEYS",
                 "'nope'"):
        assert name in message
    production.AGENTOPS_SEAL_KEYS = ["not-a-fernet-key"]
    assert "not a Fernet key" in _by_name()["key_ring"].message


@pytest.mark.postgres
def test_connection_budget_doctor_says_when_the_hosts_exceed_max_connections(production):
    fits = _by_name()["db_sessions"]
    assert fits.ok, fits.message
    assert "1 web process(es) x 20 + 1 worker host(s) x" in fits.message
    production.AGENTOPS_WORKER_HOSTS = 200  # 200 x 24 sessions: more than any test server allows
    over = _by_name()["db_sessions"]
    assert not over.ok
    assert "raise max_connections" in over.message and "minus the reserve of 10" in over.message
    production.AGENTOPS_WORKER_HOSTS, production.AGENTOPS_WEB_DB_POOL_MAX = 1, 0
    assert "unbounded" in _by_name()["db_sessions"].message


@pytest.mark.postgres
def test_behind_a_pooler_doctor_counts_the_owner_sessions_against_max_connections(production):
    production.AGENTOPS_DB_POOLER = "transaction"
    production.AGENTOPS_DB_DIRECT_URL = "postgres://postgres@127.0.0.1:5432/agentops"
    production.Q_CLUSTER = {**production.Q_CLUSTER, "workers": 2}
    production.AGENTOPS_WORKER_HOSTS = 20  # 20 + 20 x 24 client sessions: the pooler holds them
    fits = _by_name()["db_sessions"]
    assert fits.ok, fits.message
    assert "up to 500 client sessions go to the pooler" in fits.message
    assert "40 owner session(s) go straight to PostgreSQL" in fits.message
    production.AGENTOPS_WORKER_HOSTS = 1000  # 2,000 owner sessions: more than max_connections
    over = _by_name()["db_sessions"]
    assert not over.ok and "2000 owner session(s)" in over.message, over.message
    assert "Behind PgBouncer" in over.message


def test_a_role_map_naming_a_missing_team_is_reported(production):
    from agentops.settings_sso import sso_settings
    from runs.models import Team
    from tests.oidc_bad_provider import provider_env

    role_map = '{"pay-ops": "payments:operators", "ml": "research:viewers", "all": "viewers"}'
    for name, value in sso_settings(provider_env("https://idp.example.com",
                                                 AGENTOPS_OIDC_ROLE_MAP=role_map)).items():
        setattr(production, name, value)
    Team.objects.create(slug="payments", name="Payments")
    check = _by_name()["sso_teams"]
    assert not check.ok and "do not exist: research;" in check.message
    Team.objects.create(slug="research", name="Research")
    assert _by_name()["sso_teams"].ok
