"""Which database each query uses: the primary, unless a console read asked for the replica.

Only ``replica_reads()`` (entered by ``agentops.replica.middleware`` around a read page)
sends reads to the replica, and only reads of the apps' own tables outside a transaction:
sessions, users and anything a transaction reads stay on the primary, as does every write.
The engine, leases, workers and actions never enter ``replica_reads()``, so they read the
primary whatever the settings say.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

REPLICA = "replica"
# Tables the console's read pages list; auth, sessions and django-q stay on the primary.
REPLICATED_APPS = frozenset({"runs", "ledger", "approvals"})
_reads: ContextVar[bool] = ContextVar("agentops_replica_reads", default=False)


def replica_configured() -> bool:
    """Return whether a replica database is configured (AGENTOPS_REPLICA_URL)."""
    return REPLICA in connections.settings


def replica_reads_active() -> bool:
    """Return whether this request's reads may go to the replica."""
    return _reads.get()


@contextmanager
def replica_reads(on: bool = True) -> Iterator[None]:
    """Send this context's eligible reads to the replica (``on``) or back to the primary."""
    token = _reads.set(on)
    try:
        yield
    finally:
        _reads.reset(token)


class ReplicaRouter:
    """DATABASE_ROUTERS entry: replica reads inside ``replica_reads()``, the primary else."""

    def db_for_read(self, model: Any, **_hints: Any) -> str | None:
        """Return the replica for an eligible read, else the primary (never a hint's db);
        no opinion (Django's default) when no replica is configured."""
        if not replica_configured():
            return None
        if (_reads.get() and model._meta.app_label in REPLICATED_APPS
                # A transaction reads what it has just written: the primary's.
                and not connections[DEFAULT_DB_ALIAS].in_atomic_block):
            return REPLICA
        return DEFAULT_DB_ALIAS

    def db_for_write(self, model: Any, **_hints: Any) -> str | None:
        """Return the primary: an object read from the replica is saved to the primary."""
        return DEFAULT_DB_ALIAS if replica_configured() else None

    def allow_relation(self, _obj1: Any, _obj2: Any, **_hints: Any) -> bool:
        """Allow relations between rows read from either copy of the same database."""
        return True

    def allow_migrate(self, db: str, _app_label: str, **_hints: Any) -> bool | None:
        """Never migrate the replica: it replays the primary's schema."""
        return False if db == REPLICA else None
