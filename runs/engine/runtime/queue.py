"""Put a run's next tick on the django-q2 queue; name this worker (the lease owner).

The task is named by its dotted path (``runs.tasks.tick``), so the runtime enqueues without
importing the q2 entry points that call it.
"""
from __future__ import annotations

import os
import socket
from typing import Any

from django.conf import settings
from django.db import transaction
from django_q.tasks import async_task

from runs.models import Run
from runs.statuses import RunStatus


def worker_name() -> str:
    """Return this process's worker name (host:pid), used as the lease owner."""
    return f"{socket.gethostname()}:{os.getpid()}"


def enqueue_tick(run_id: Any) -> None:
    """Put a tick of ``run_id`` on the q2 queue (unless AGENTOPS_ENQUEUE_TICKS is off)."""
    if not settings.AGENTOPS_ENQUEUE_TICKS:
        return
    async_task("runs.tasks.tick", str(run_id), task_name=f"tick:{run_id}",
               q_options=tick_q_options())


def tick_q_options() -> dict[str, Any]:
    """Return the q2 options every tick is enqueued with.

    ``save: False``: q2's monitor records no result row for a tick that returned (a failed
    one is still recorded). The run's state is in its event log; the result row cost the
    monitor a locked read of every kept result (``save_limit``), an insert and a delete per
    tick, ~5 ms of CPU on the worker host: the monitor, not the broker, capped dispatch.
    """
    return {"save": False}


def run_others_queued() -> bool:
    """Return True when some run waits in the queue for a worker (the asking run is running,
    so it is never among them): one index probe of ``(status, updated_at)``."""
    return Run.objects.filter(status=RunStatus.QUEUED).exists()


def run_enqueue(run_id: Any) -> None:
    """Enqueue a tick for ``run_id`` once the current transaction commits."""
    transaction.on_commit(lambda: enqueue_tick(run_id))
