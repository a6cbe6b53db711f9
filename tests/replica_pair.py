"""This test process's Django connections pointed at a primary/standby pair (tests/replica_cluster).

``pair_connected(pair)`` points the ``default`` alias at the pair's primary and adds the
``replica`` alias on its standby, as AGENTOPS_REPLICA_URL does in agentops/settings.py, and
migrates the primary (the standby replays the schema). Everything is put back at the end.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import pytest
from django.core.management import call_command
from django.db import connection, connections

from agentops.replica.probe import _cache
from agentops.replica.router import REPLICA
from tests.replica_cluster import Pair, missing


def pair_or_skip() -> None:
    """Skip unless PostgreSQL's binaries are here (fail instead in CI) and this is the
    PostgreSQL pass."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (runs in the PostgreSQL pass of make test)")
    reason = missing()
    if reason and os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}")
    if reason:
        pytest.skip(reason)


def point(alias_settings: dict, port: int, **extra: object) -> None:
    """Point one alias's settings at the pair's database ``agentops`` on ``port``."""
    alias_settings.update(HOST="127.0.0.1", PORT=str(port), NAME="agentops", **extra)


@contextmanager
def pair_connected(pair: Pair) -> Iterator[Pair]:
    """Use ``pair`` for this process's ``default`` and ``replica`` aliases, migrated."""
    default = connections["default"].settings_dict
    saved = dict(default)
    connections.close_all()
    point(default, pair.ports["primary"])
    replica = {**saved, "OPTIONS": {**saved.get("OPTIONS", {}), "connect_timeout": 2},
               "TEST": {"MIRROR": "default"}}
    point(replica, pair.ports["standby"])
    connections.settings[REPLICA] = replica
    try:
        call_command("migrate", verbosity=0)
        yield pair
    finally:
        connections.close_all()
        with suppress(AttributeError):  # never opened in this thread
            del connections[REPLICA]
        del connections.settings[REPLICA]
        default.clear()
        default.update(saved)
        _cache.update(at=-1e9, status=None, down_until=0.0)
