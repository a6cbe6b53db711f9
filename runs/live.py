"""Push committed run changes to open console pages through the Channels layer.

Every commit that touches a run goes through ``runs.engine.runtime.events._append``, which calls
``live_run_changed``; operator actions call ``live_publish`` with who did what. Messages are
sent after the transaction commits (``transaction.on_commit``), never for a rolled-back change.

Cost on the engine's hot path: a lease holder commits a unit every few milliseconds, so its
plain units are coalesced (one message per run per ``COALESCE_S``; the rest are flushed before
the worker starts a slow model or tool call, and every status change is sent at once). With
the in-memory layer (no REDIS_URL) a message can only reach pages served by the same process,
so nothing is sent when no page of this process listens.

``live_publish(run_id, kind, data)`` is the small public API for other live messages (for
example token streaming): ``kind`` is dotted (``"run.tokens"``), ``data`` plain JSON.

Teams: a message goes to the run's own group, to its team's queue group and to the
installation-wide queue group. A page joins the queue group of each team its user sees (or
the installation-wide one for an installation-wide role), so it never hears of another team's
run; a run page is refused unless its user sees the run's team (runs.consumers).
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import transaction

from runs.models import Run

log = logging.getLogger(__name__)
QUEUE_GROUP = "queue"
COALESCE_S = 0.25
_UNSET = object()
_layer: Any = _UNSET
_last_sent: dict[str, float] = {}
_pending: dict[str, dict[str, Any]] = {}
_TEAM = "_team"  # the run's team id, kept with a coalesced change until it is sent

# Past tense of each operator action, for "alice retried this run".
_DONE = {
    "run.retry": "retried", "run.skip": "skipped the step of", "run.rollback": "rolled back",
    "run.terminate": "terminated", "run.confirm_executed": "confirmed the call executed on",
    "run.confirm_not_executed": "confirmed the call did not execute on",
    "run.resume": "resumed", "run.raise_budget": "raised the budget of",
    "approval.approve": "approved a call of", "approval.reject": "rejected a call of",
    "approval.edit_args": "edited and approved a call of",
}


def run_group(run_id: Any) -> str:
    """Return the channel-layer group of one run's page."""
    return f"run.{run_id}"


def team_group(team_id: int) -> str:
    """Return the channel-layer group of the queue and inbox pages of one team's members."""
    return f"queue.team.{team_id}"


def _groups(run_id: Any, team_id: int | None) -> tuple[str, ...]:
    """Return the groups a message about ``run_id`` (of team ``team_id``) goes to."""
    if team_id is None:  # the engine passes the team; other callers may not
        team_id = Run.objects.filter(pk=run_id).values_list("team_id", flat=True).first()
    base = (run_group(run_id), QUEUE_GROUP)
    return base if team_id is None else (*base, team_group(team_id))


def action_phrase(action: str, actor: str) -> str:
    """Return what a person did to a run in words, e.g. "alice retried this run"."""
    done = _DONE.get(action) or (action.split(".")[-1].replace("_", " ") + " on")
    return f"{actor or 'someone'} {done} this run"


def live_publish(run_id: Any, kind: str = "run.changed", data: dict[str, Any] | None = None,
                 *, team_id: int | None = None) -> None:
    """Send ``kind`` with ``data`` to the run's page and its team's queue pages once the
    change commits (``team_id``: the run's team, read from the run when not given)."""
    if _channel_layer() is None:
        return
    message = {"type": "live.message", "kind": kind, "run_id": str(run_id), **(data or {})}
    groups = _groups(run_id, team_id)
    transaction.on_commit(lambda: _send(message, groups))


def live_run_changed(run_id: Any, *, status: str | None = None, actor: str = "",
                     lease_holder: bool = False, team_id: int | None = None,
                     before_send: Callable[[], None] | None = None) -> None:
    """Publish that ``run_id`` changed (the engine hook; a lease holder's units coalesce).

    ``before_send`` runs only when a message goes out to a page that may hear it (the engine
    reads a unit still in flight first, so a console refreshing on the message reads what it
    announces).
    """
    layer = _channel_layer()
    if layer is None:
        return
    if isinstance(layer, InMemoryChannelLayer) and not layer.groups:
        # No page of this process listens at all: _send would drop the message, and a
        # coalesced change of this run can reach no page either (live_flush drops it).
        if _pending:
            _pending.pop(str(run_id), None)
        return
    key = str(run_id)
    data: dict[str, Any] = {"status": status} if status else {}
    if actor:
        data["actor"] = actor
    if lease_holder and not status:
        now = time.monotonic()
        if now - _last_sent.get(key, 0.0) < COALESCE_S:
            _pending[key] = {**data, _TEAM: team_id}
            return
        _last_sent[key] = now
    else:
        _pending.pop(key, None)
        _last_sent.pop(key, None)
    if before_send is not None and _heard(key, team_id):
        before_send()
    live_publish(key, "run.changed", data, team_id=team_id)


def live_flush(run_id: Any, *, before_send: Callable[[], None] | None = None) -> None:
    """Send a coalesced change of ``run_id`` now (before the worker waits on slow I/O).

    Called before every model and tool call, outside any transaction (so ``live_publish``
    would send at once): when no page can hear it (the in-memory layer, no page of this
    process listening), it is dropped here instead, as ``_send`` would drop it.
    """
    if not _pending:  # nothing coalesced, nothing to do
        return
    key = str(run_id)
    data = _pending.pop(key, None)
    if data is not None:
        team_id = data.pop(_TEAM, None)
        heard = _heard(key, team_id)
        if before_send is not None and heard:
            before_send()
        _last_sent[key] = time.monotonic()
        if heard or team_id is None:  # no team given: live_publish reads it, _send decides
            live_publish(key, "run.changed", data, team_id=team_id)


def _channel_layer() -> Any:
    global _layer
    if _layer is _UNSET:
        try:
            _layer = get_channel_layer()
        except Exception:  # noqa: BLE001 - a misconfigured layer turns live updates off
            log.warning("channel layer unavailable; live updates are off", exc_info=True)
            _layer = None
    return _layer


def _heard(run_id: str, team_id: int | None) -> bool:
    """Return whether a message about ``run_id`` may reach a page (``_send`` would send it)."""
    layer = _channel_layer()
    if layer is None:
        return False
    groups = (run_group(run_id), QUEUE_GROUP,
              *((team_group(team_id),) if team_id is not None else ()))
    return _listened(layer, groups)


def _listened(layer: Any, groups: tuple[str, ...]) -> bool:
    if not isinstance(layer, InMemoryChannelLayer):
        return True  # a shared layer (Redis): pages of other processes may listen
    return any(layer.groups.get(g) for g in groups)


def _send(message: dict[str, Any], groups: tuple[str, ...]) -> None:
    layer = _channel_layer()
    if layer is None or not _listened(layer, groups):
        return
    if not isinstance(layer, InMemoryChannelLayer):
        _publisher().submit(layer, groups, message)
        return
    # The in-memory layer lives on this process's event loop: async_to_sync reaches it.
    try:
        for group in groups:
            async_to_sync(layer.group_send)(group, message)
    except Exception:  # noqa: BLE001 - best effort, see _Publisher
        log.warning("live update for run %s not delivered", message["run_id"], exc_info=True)


class _Publisher:
    """One thread per process with its own event loop and Redis connections, sending in order.

    A commit only puts the message on a queue (microseconds); connecting to Redis per message
    from a fresh event loop would cost tens of milliseconds per commit. A change is committed
    before it is announced, so a broken channel layer is logged and never fails the unit of
    work that made the change (pages can always be reloaded).
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.queue: asyncio.Queue[tuple[Any, tuple[str, ...], dict[str, Any]]] | None = None
        self.ready = threading.Event()
        threading.Thread(target=self._run, name="live-publisher", daemon=True).start()
        self.ready.wait(5)

    def submit(self, layer: Any, groups: tuple[str, ...], message: dict[str, Any]) -> None:
        if self.queue is not None:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, (layer, groups, message))

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._drain())

    async def _drain(self) -> None:
        self.queue = asyncio.Queue()
        self.ready.set()
        while True:
            layer, groups, message = await self.queue.get()
            try:
                for group in groups:
                    await layer.group_send(group, message)
            except Exception:  # noqa: BLE001 - best effort, see the class docstring
                log.warning("live update for run %s not delivered", message["run_id"],
                            exc_info=True)


_PUBLISHER: _Publisher | None = None
_PUBLISHER_LOCK = threading.Lock()


def _publisher() -> _Publisher:
    global _PUBLISHER
    with _PUBLISHER_LOCK:
        # A forked worker process does not inherit the parent's thread: start its own.
        if _PUBLISHER is None or _PUBLISHER.pid != os.getpid():
            _PUBLISHER = _Publisher()
        return _PUBLISHER


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
        layer = _channel_layer()
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
