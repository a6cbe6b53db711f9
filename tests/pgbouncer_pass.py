"""The PgBouncer pass (``make test-pgbouncer``): the test database, then every connection
through a PgBouncer in transaction mode.

pytest-django creates and migrates the test database directly on PostgreSQL (PgBouncer would
keep server connections to it open, and DROP DATABASE at the end would fail); then a
pgbouncer of its own starts on a free loopback port (pool_mode=transaction, 10 server
connections) and this process's connections, the live server's, and every worker process
the tests start (tests.e2e.workers.worker_env builds their DATABASE_URL from this
connection's settings) go through it, with ``AGENTOPS_DB_POOLER=transaction`` and
``AGENTOPS_DB_DIRECT_URL`` naming the test database directly (runs.pooler).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from django.conf import settings
from django.db import connections

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from pgbouncer_local import Bouncer

POOL_SIZE = 10
# What a worker sets for itself without a pooler (runs.cli.worker): max(10 s, 3 x TTL).
IDLE_TX_S = 10


@contextmanager
def through_pgbouncer() -> Iterator[Bouncer]:
    """Start pgbouncer in front of the test database and send every connection through it."""
    db = connections["default"].settings_dict
    host, port = db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432)
    direct = f"postgres://{db['USER']}@{host}:{port}/{db['NAME']}"
    bouncer = Bouncer(upstream_host=host, upstream_port=port, user=db["USER"],
                      pool_size=POOL_SIZE, idle_transaction_timeout=IDLE_TX_S,
                      ensure=os.environ.get("CI") == "true").start()
    before = {"HOST": db["HOST"], "PORT": db["PORT"],
              "DISABLE_SERVER_SIDE_CURSORS": db.get("DISABLE_SERVER_SIDE_CURSORS", False)}
    env = {"AGENTOPS_DB_POOLER": "transaction", "AGENTOPS_DB_DIRECT_URL": direct}
    saved = {k: os.environ.get(k) for k in env}
    connections.close_all()
    db.update(HOST="127.0.0.1", PORT=str(bouncer.port), DISABLE_SERVER_SIDE_CURSORS=True)
    settings.AGENTOPS_DB_POOLER, settings.AGENTOPS_DB_DIRECT_URL = "transaction", direct
    os.environ.update(env)
    try:
        yield bouncer
    finally:
        connections.close_all()
        bouncer.stop()
        _sessions_end(direct)  # this process's owner session (runs.pooler), before the DROP
        db.update(before)
        settings.AGENTOPS_DB_POOLER, settings.AGENTOPS_DB_DIRECT_URL = "", ""
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _sessions_end(direct: str) -> None:
    """End every other session on the test database (it is dropped next)."""
    with psycopg.connect(direct, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                     "WHERE datname = current_database() AND pid <> pg_backend_pid()")
