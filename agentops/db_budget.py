"""How many PostgreSQL sessions each kind of AgentOps process may hold, and the web pool.

A web process (daphne) runs Django's sync code on a new thread per request context, so
persistent connections (``CONN_MAX_AGE``) were kept per thread and a burst of requests left
one session per thread behind. ``web_pool_enable`` (called by ``agentops.asgi``) serves the
whole process from one psycopg pool of at most ``AGENTOPS_WEB_DB_POOL_MAX`` connections: a
request takes one at its first query and hands it back when it ends; a request that finds
every connection busy waits for one (up to ``AGENTOPS_DB_POOL_TIMEOUT_S``). Idle connections
above the pool's minimum are closed one per ``AGENTOPS_DB_POOL_IDLE_S``. The read replica's
connections (AGENTOPS_REPLICA_URL) come from a second pool of the same size, so a page read
from the standby does not open a session to it.

``session_budget()`` states the maximum of every process kind (docs/deploy.md) and
``agentops doctor`` compares their sum for the configured hosts with the server's
``max_connections``.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from agentops.host_sessions import KEEPER, WORKER_HOST_FIXED
from runs.engine.runtime.queue import worker_name
from runs.pooler import session_name

POOL_MIN = 2  # connections a pool keeps open when idle (web and worker processes alike)
REPLICA_ALIAS = "replica"  # agentops.replica.router.REPLICA (a layer above this one)
REPLICA_WAIT_S = 2.0  # a page's wait for a standby connection without a connect_timeout


def web_pool_enable() -> None:
    """Serve this ASGI process's database work from one bounded psycopg pool.

    Called once by ``agentops.asgi`` before any request: daphne does not fork, so the pool
    (with its threads) lives in the process that uses it. No-op off PostgreSQL or with
    ``AGENTOPS_WEB_DB_POOL_MAX=0`` (then each request thread keeps its own connection).
    """
    db = connections[DEFAULT_DB_ALIAS].settings_dict
    if db["ENGINE"] != "django.db.backends.postgresql" or web_sessions_max() <= 0:
        return
    options = db.setdefault("OPTIONS", {})
    # Named at connect time, as a worker's pooled sessions are (runs.apps skips them).
    options.setdefault("application_name", session_name())
    options["pool"] = {"min_size": min(POOL_MIN, web_sessions_max()),
                       "max_size": web_sessions_max(),
                       "timeout": settings.AGENTOPS_DB_POOL_TIMEOUT_S,
                       "max_idle": settings.AGENTOPS_DB_POOL_IDLE_S,
                       "name": f"agentops-web-{worker_name()}"}
    db["CONN_MAX_AGE"] = 0  # Django requires it with a pool: close() hands back to the pool
    _replica_pool_enable()


def _replica_pool_enable() -> None:
    """Pool the standby's connections (agentops.replica) too, at most the primary pool's size.

    A page reads the standby only while it holds one of the primary pool's connections, so
    no more than ``web_sessions_max()`` requests want it at once. A page waits for a
    standby connection no longer than the standby's ``connect_timeout`` (a dead standby
    costs a page what an unpooled connect to it cost), then reads the primary.
    """
    replica = connections.settings.get(REPLICA_ALIAS)
    if replica is None:
        return
    options = replica.setdefault("OPTIONS", {})
    options.setdefault("application_name", session_name())
    options["pool"] = {"min_size": min(POOL_MIN, web_replica_sessions_max()),
                       "max_size": web_replica_sessions_max(),
                       "timeout": float(options.get("connect_timeout", REPLICA_WAIT_S)),
                       "max_idle": settings.AGENTOPS_DB_POOL_IDLE_S,
                       "name": f"agentops-web-replica-{worker_name()}"}
    replica["CONN_MAX_AGE"] = 0


def web_sessions_max() -> int:
    """Return the sessions one web process may hold (its pool's size)."""
    return max(0, int(settings.AGENTOPS_WEB_DB_POOL_MAX))


def web_replica_sessions_max() -> int:
    """Return the standby sessions one web process may hold (AGENTOPS_REPLICA_URL set).

    The size of its standby pool (``web_pool_enable``): a page reaches the standby only
    after its first query (the signed-in session) took one of the primary pool's
    connections, so no more requests than that pool's size read it at once.
    """
    return web_sessions_max()


def worker_host_sessions_max() -> int:
    """Return the sessions one worker host (``agentops worker``) may hold."""
    pool = max(1, int(settings.AGENTOPS_DB_POOL_MAX))  # 0 = no pool: one per slot thread
    if int(settings.AGENTOPS_DB_POOL_MAX) <= 0:
        pool = max(1, int(settings.AGENTOPS_RUNS_IN_FLIGHT)) + 1
    return int(settings.Q_CLUSTER["workers"]) * pool + KEEPER + WORKER_HOST_FIXED


@dataclass(frozen=True)
class SessionBudget:
    """The sessions the configured hosts may hold together, against the server's limit."""

    web: int
    workers: int
    reserve: int


def session_budget() -> SessionBudget:
    """Return the configured hosts' maximum sessions (AGENTOPS_WEB_PROCESSES, _WORKER_HOSTS)."""
    return SessionBudget(
        web=int(settings.AGENTOPS_WEB_PROCESSES) * web_sessions_max(),
        workers=int(settings.AGENTOPS_WORKER_HOSTS) * worker_host_sessions_max(),
        reserve=int(settings.AGENTOPS_DB_RESERVE))
