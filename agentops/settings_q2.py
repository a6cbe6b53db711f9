"""django-q2's cluster settings (``Q_CLUSTER``), as one function settings.py calls.

settings.py reads the environment (AGENTOPS_Q_TIMEOUT, AGENTOPS_WORKERS, AGENTOPS_Q_RECYCLE,
AGENTOPS_Q_BROKER; docs/settings.md) and passes the values here.
"""
from __future__ import annotations

from typing import Any


def q_cluster(*, timeout: int, workers: int, recycle: int, redis_url: str) -> dict[str, Any]:
    """Return ``Q_CLUSTER``: on the database's queue table (PostgreSQL: woken by NOTIFY),
    or on Redis when ``redis_url`` is given."""
    cluster: dict[str, Any] = {
        "name": "agentops",
        "workers": workers,
        "timeout": timeout,
        "retry": timeout + 60,
        "max_attempts": 1,
        "ack_failures": True,
        "save_limit": 200,
        "poll": 0.05,
        # Prefetch at most one task per cluster (q2's default is workers²): a prefetched
        # tick is hidden from other hosts, and lost for `retry` seconds if this host dies.
        "queue_limit": 1,
        # q2's pusher takes this many tasks per query whatever the free slots
        # (docs/workers.md).
        "bulk": 1,
        "catch_up": False,
        # q2 recycles a process after this many tasks; a recycled process first waits for
        # the runs it has in flight (runs.slots), so recycle rarely (AGENTOPS_Q_RECYCLE).
        "recycle": recycle,
        "label": "Django Q2",
    }
    if redis_url:
        cluster["redis"] = redis_url
    else:
        cluster["orm"] = "default"
        # q2's ORM broker, on PostgreSQL woken by NOTIFY instead of polled every `poll`.
        cluster["broker_class"] = "runs.engine.runtime.q2_broker.ListeningBroker"
    return cluster
