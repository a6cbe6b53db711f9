"""Shared fixtures: database vendor markers, runs, a second real connection."""
from __future__ import annotations

import pytest
from django.db import connection


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
    return f"database: {where}"


def pytest_collection_modifyitems(config, items):
    """Skip tests marked ``postgres`` when the suite runs on SQLite."""
    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (runs in the PostgreSQL pass of make test)")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _artifacts_in_tmp(settings, tmp_path):
    """Keep every test's artifacts in its own temporary folder."""
    storages = dict(settings.STORAGES)
    storages["artifacts"] = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(tmp_path / "artifacts")},
    }
    settings.STORAGES = storages  # Django's setting_changed handler resets the storages


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
