"""How far the replica has replayed the primary's WAL, and how far behind it is.

``replica_status()`` asks the replica at most once a second per process (a console page
asks on every request); an unreachable replica is logged once and not asked again for
``DOWN_RETRY_S``, so its pages read the primary meanwhile instead of failing.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from agentops.replica.router import REPLICA

log = logging.getLogger("agentops.replica")
FRESH_S = 1.0  # how long one answer is reused
DOWN_RETRY_S = 5.0  # how long an unreachable replica is left alone
# Lag when received WAL is still to be replayed: the age of the last transaction replayed.
# Caught up (nothing received left to replay) is no lag, however old that transaction is.
_STATUS_SQL = ("SELECT pg_last_wal_replay_lsn()::text, CASE WHEN pg_last_wal_receive_lsn() "
               "IS NOT DISTINCT FROM pg_last_wal_replay_lsn() THEN 0 ELSE COALESCE(EXTRACT("
               "EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp()), 0) END")


@dataclass(frozen=True)
class ReplicaStatus:
    """What the replica has replayed (a WAL position) and how many seconds behind it is."""

    replayed: int
    lag_s: float


_lock = threading.Lock()
_cache: dict[str, float | ReplicaStatus | None] = {"at": -1e9, "status": None, "down_until": 0.0}


def lsn_int(text: str | None) -> int:
    """Return a WAL position written ``X/Y`` (hex) as an integer; 0 for none."""
    if not text:
        return 0
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) + int(low, 16)


def primary_position() -> int:
    """Return the primary's current WAL insert position (every commit so far is before it)."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cur:
        cur.execute("SELECT pg_current_wal_insert_lsn()::text")
        return lsn_int(cur.fetchone()[0])


def replica_status(*, fresh: bool = False) -> ReplicaStatus | None:
    """Return the replica's replay position and lag (reused up to ``FRESH_S``), or None
    when it cannot be reached (logged; asked again after ``DOWN_RETRY_S``)."""
    now = time.monotonic()
    with _lock:
        if now < _cache["down_until"]:
            return None
        if not fresh and now - _cache["at"] < FRESH_S:
            return _cache["status"]  # type: ignore[return-value]
    status = _ask()
    with _lock:
        _cache.update(at=now, status=status,
                      down_until=now + DOWN_RETRY_S if status is None else 0.0)
    return status


def replica_down(reason: object) -> None:
    """Note that the replica failed (a query on it raised): read the primary for a while."""
    log.warning("replica unreachable, reading the primary for %gs: %s", DOWN_RETRY_S, reason)
    with _lock:
        _cache.update(status=None, down_until=time.monotonic() + DOWN_RETRY_S)
    connections[REPLICA].close()


def _ask() -> ReplicaStatus | None:
    try:
        with connections[REPLICA].cursor() as cur:
            cur.execute(_STATUS_SQL)
            replayed, lag = cur.fetchone()
    except DatabaseError as exc:
        replica_down(exc)
        return None
    if replayed is None:  # not a standby (promoted, or a primary named by mistake)
        replica_down("it is not replaying WAL (pg_last_wal_replay_lsn() is null)")
        return None
    return ReplicaStatus(replayed=lsn_int(replayed), lag_s=float(lag))
