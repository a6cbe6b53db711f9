"""Tell open console pages that a run changed, after the change is committed."""
from __future__ import annotations

import logging
import time
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


class LiveText:
    """Push a model's reply text to the run's page while it streams, in small batches.

    Called from the worker outside any transaction (the text is not a fact yet: the reply is
    recorded when it is complete), so it is sent at once rather than on commit.
    """

    def __init__(self, run_id: Any, *, step: str, turn: int, every_s: float = 0.2) -> None:
        self.run_id, self.step, self.turn, self.every_s = str(run_id), step, turn, every_s
        self._buffer: list[str] = []
        self._sent_at = 0.0

    def __call__(self, piece: str) -> None:
        """Take the next piece of text; send what has gathered every ``every_s`` seconds."""
        self._buffer.append(piece)
        if time.monotonic() - self._sent_at >= self.every_s:
            self.flush()

    def flush(self) -> None:
        """Send whatever text has gathered."""
        if not self._buffer:
            return
        text, self._buffer = "".join(self._buffer), []
        self._sent_at = time.monotonic()
        layer = get_channel_layer()
        if layer is None:
            return
        message = {"type": "model_text", "run_id": self.run_id, "step": self.step,
                   "turn": self.turn, "text": text}
        try:
            async_to_sync(layer.group_send)(run_group(self.run_id), message)
        except Exception:  # noqa: BLE001 - best effort, like every live update
            log.warning("streamed text for run %s not delivered", self.run_id, exc_info=True)


def live_text_sink(run_id: Any, *, step: str, turn: int) -> LiveText:
    """Return the sink a streaming model client feeds the reply's text into."""
    return LiveText(run_id, step=step, turn=turn)
