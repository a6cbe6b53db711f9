"""Shared fixtures: database vendor markers, runs, a second real connection."""
from __future__ import annotations

import os

import pytest
from django.db import connection

PGBOUNCER_PASS = os.environ.get("AGENTOPS_TEST_PGBOUNCER") == "1"


def pytest_sessionstart(session):
    """Say which database this pass runs on, even under -q (make test runs two passes)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(_database_line())


def _database_line() -> str:
    from django.conf import settings

    db = settings.DATABASES["default"]
    test_name = (db.get("TEST") or {}).get("NAME")
    if db["ENGINE"].endswith("sqlite3"):
        where = f"SQLite, test database {test_name or 'in memory'}"
    else:
        where = (f"PostgreSQL at {db.get('HOST') or 'localhost'}:{db.get('PORT') or 5432}, "
                 f"test database {test_name or 'test_' + db['NAME']}")
    if PGBOUNCER_PASS:
        where += ", then through a PgBouncer in transaction mode (tests/pgbouncer_pass.py)"
    return f"database: {where}"


def pytest_collection_modifyitems(config, items):
    """Skip tests marked ``postgres`` when the suite runs on SQLite, and tests marked
    ``pgbouncer`` outside the PgBouncer pass (AGENTOPS_TEST_PGBOUNCER=1)."""
    if not PGBOUNCER_PASS:
        skip = pytest.mark.skip(reason="runs in the PgBouncer pass (make test-pgbouncer)")
        for item in items:
            if "pgbouncer" in item.keywords:
                item.add_marker(skip)
    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (runs in the PostgreSQL pass of make test)")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _through_pgbouncer(request):
    """With AGENTOPS_TEST_PGBOUNCER=1 (make test-pgbouncer): once the test database exists,
    every connection goes through a PgBouncer in transaction mode (tests/pgbouncer_pass.py)."""
    if not PGBOUNCER_PASS:
        yield None
        return
    if connection.vendor != "postgresql":
        pytest.fail("AGENTOPS_TEST_PGBOUNCER=1 needs a PostgreSQL DATABASE_URL")
    request.getfixturevalue("django_db_setup")  # created directly; dropped after pgbouncer stops
    from tests.pgbouncer_pass import through_pgbouncer

    with through_pgbouncer() as bouncer:
        yield bouncer


@pytest.fixture(autouse=True)
def _artifacts_in_tmp(settings, tmp_path):
    """Keep every test's artifacts in its own temporary folder."""
    storages = dict(settings.STORAGES)
    storages["artifacts"] = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(tmp_path / "artifacts")},
    }
    settings.STORAGES = storages  # Django's setting_changed handler resets the storages


@pytest.fixture(autouse=True)
def _no_read_seen_quick():
    """Start every test in a process that has seen no read tool answer (runs.engine.runtime.
    read_rides): whether a reply waits for its reads does not depend on the tests before."""
    from runs.engine.runtime import read_rides

    read_rides._last_ms.clear()


@pytest.fixture
def run(db):
    """A queued run with its run.created event, for a test agent that needs no registry."""
    from tests.factories import make_run

    return make_run()


@pytest.fixture
def engine(settings):
    """Engine settings for driving ticks in-process: no queue, no backoff sleeps; a clean world."""
    from tests import engine_agents

    settings.AGENTOPS_ENQUEUE_TICKS = False
    settings.AGENTOPS_BACKOFF_BASE_S = 0.0
    settings.AGENTOPS_AGENTS = []
    engine_agents.world.effects.clear()
    engine_agents.world.fail_next.clear()
    engine_agents.world.timeout_after_effect.clear()
    return engine_agents


def drive(run, *, max_ticks: int = 50) -> str:
    """Tick ``run`` in-process until it leaves queued/running; return its final status."""
    from runs.engine.runtime.loop import run_tick

    for _ in range(max_ticks):
        run.refresh_from_db()
        if run.status not in ("queued", "running"):
            return run.status
        run_tick(run.pk, worker="test-worker")
    run.refresh_from_db()
    return run.status
