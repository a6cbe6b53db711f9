"""Fixtures shared by the runs tests."""
from collections.abc import Iterator

import pytest
from django.db import connection

from runs import slots
from tests.console_factories import make_role_users


@pytest.fixture
def users():
    """One user per role plus 'nobody' without a role."""
    return make_role_users()


@pytest.fixture
def pooled(settings) -> Iterator[None]:
    """This process's connections pooled as in a worker process; restored afterwards."""
    db = connection.settings_dict
    saved = {k: db[k] for k in ("CONN_MAX_AGE", "CONN_HEALTH_CHECKS")}
    options = dict(db.get("OPTIONS", {}))
    settings.AGENTOPS_DB_POOL_MAX = 2
    slots.pool_enable()
    try:
        yield
    finally:
        connection.close()
        connection.close_pool()
        db.update(saved)
        db["OPTIONS"] = options
        slots._state["pooled"] = False
