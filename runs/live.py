"""Tell open console pages that a run changed, after the change is committed."""
from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)
QUEUE_GROUP = "queue"


def run_group(run_id: Any) -> str:
    """Return the channel-layer group of one run's page."""
    return f"run.{run_id}"


def live_notify_run(run_id: Any, *, kind: str = "run.changed") -> None:
    """Send ``kind`` to the run's page and the queue once the current transaction commits."""
    transaction.on_commit(lambda: _send(str(run_id), kind))


def _send(run_id: str, kind: str) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": kind.replace(".", "_"), "run_id": run_id}
    # Live updates are a courtesy (pages also poll): a broken channel layer must never fail
    # the engine's unit of work, so log and carry on.
    try:
        async_to_sync(layer.group_send)(run_group(run_id), message)
        async_to_sync(layer.group_send)(QUEUE_GROUP, message)
    except Exception:  # noqa: BLE001 - best effort, see above
        log.warning("live update for run %s not delivered", run_id, exc_info=True)
