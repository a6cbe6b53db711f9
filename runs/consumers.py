"""Websocket consumers: pages hear committed run changes (who did what); run pages share presence.

A page hears only runs of the teams its user sees: the queue consumer joins each of those
teams' groups (an installation-wide role: the installation-wide group), and a run page is
refused (4404) unless its user sees the run's team, exactly as for a run that does not exist.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import channel_layers
from redis.exceptions import RedisError

from approvals.roles import can_view
from runs.live import QUEUE_GROUP, run_group, team_group
from runs.models import Run
from runs.scope import scoped, visible_teams

log = logging.getLogger("agentops.live")
_FORBIDDEN = 4403
_NO_SUCH_RUN = 4404  # none, or another team's: the same answer
# An open websocket whose channel layer (Redis) went away (daphne accepts no 1011 from us).
_LAYER_LOST = 4503
_outage = {"down": False}  # one log line when Redis goes away, one when it answers again


class QueueConsumer(AsyncJsonWebsocketConsumer):
    """Push run changes (``runs.live``) to the queue and inbox pages."""

    groups_joined: list[str]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve the websocket; when the channel layer (Redis) fails, refuse or close it.

        A failure before ``accept`` refuses the upgrade (the server answers 403, the page
        keeps polling); after it, the websocket closes with 4503. Either way the process's
        layer is dropped, so the next websocket connects to Redis afresh, not through a
        pooled connection that died with the old server.
        """
        gone = asyncio.Event()  # the browser closed: a late layer error is no outage

        async def receive_noting_disconnect() -> dict[str, Any]:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                gone.set()
            return message

        async def send_noting_accept(message: dict[str, Any]) -> None:
            await send(message)
            if message["type"] == "websocket.accept" and _outage["down"]:
                _outage["down"] = False
                log.warning("Redis answers again: live updates are back")

        try:
            await super().__call__(scope, receive_noting_disconnect, send_noting_accept)
        except (RedisError, OSError) as exc:
            if gone.is_set():
                log.debug("channel layer error after the websocket closed: %s", exc)
                return
            await _layer_lost(getattr(self, "channel_layer", None), exc)
            with contextlib.suppress(Exception):  # the browser may have gone already
                await send({"type": "websocket.close", "code": _LAYER_LOST})

    async def connect(self) -> None:
        """Accept signed-in viewers and join the queue group."""
        user = self.scope.get("user")
        if not await _may_view(user):
            await self.close(code=_FORBIDDEN)
            return
        teams = await database_sync_to_async(visible_teams)(user)
        self.groups_joined = ([QUEUE_GROUP] if teams is None
                              else [team_group(t) for t in sorted(teams)])
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        """Leave the groups joined on connect."""
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def live_message(self, event: dict[str, Any]) -> None:
        """Forward a message of ``runs.live.live_publish`` to the browser as ``{"type": kind}``."""
        body = {k: v for k, v in event.items() if k not in ("type", "kind")}
        await self.send_json({"type": event.get("kind", "run.changed"), **body})


class RunConsumer(QueueConsumer):
    """Push changes of one run and tell each viewer who else is looking at it."""

    async def connect(self) -> None:
        """Join the run's group and announce this viewer to the others."""
        user = self.scope.get("user")
        if not await _may_view(user):
            await self.close(code=_FORBIDDEN)
            return
        self.run_id = str(self.scope["url_route"]["kwargs"]["run_id"])
        if not await database_sync_to_async(_sees_run)(user, self.run_id):
            await self.close(code=_NO_SUCH_RUN)
            return
        self.group = run_group(self.run_id)
        self.username = user.get_username()
        self.viewers: dict[str, str] = {}
        self.groups_joined = [self.group]
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self._broadcast("presence_join")

    async def disconnect(self, code: int) -> None:
        """Tell the others this viewer left, then leave the group."""
        if getattr(self, "group", None):
            await self._broadcast("presence_leave")
        await super().disconnect(code)

    async def model_text(self, event: dict[str, Any]) -> None:
        """Forward a piece of a model reply that is still streaming."""
        await self.send_json({"type": "model.text", "step": event.get("step"),
                              "turn": event.get("turn"), "text": event.get("text", "")})

    async def _broadcast(self, kind: str) -> None:
        await self.channel_layer.group_send(
            self.group, {"type": kind, "user": self.username, "channel": self.channel_name})

    async def presence_join(self, event: dict[str, Any]) -> None:
        """Record a newcomer and answer it directly so it learns who is already here."""
        if event["channel"] == self.channel_name:
            return
        self.viewers[event["channel"]] = event["user"]
        await self.channel_layer.send(event["channel"], {
            "type": "presence_here", "user": self.username, "channel": self.channel_name})
        await self._send_presence()

    async def presence_here(self, event: dict[str, Any]) -> None:
        """Record a viewer who was here before us."""
        self.viewers[event["channel"]] = event["user"]
        await self._send_presence()

    async def presence_leave(self, event: dict[str, Any]) -> None:
        """Forget a viewer who left."""
        self.viewers.pop(event["channel"], None)
        await self._send_presence()

    async def _send_presence(self) -> None:
        others = sorted({u for u in self.viewers.values() if u != self.username})
        await self.send_json({"type": "presence", "users": others})


async def _layer_lost(layer: Any, exc: BaseException) -> None:
    """Drop this process's channel layer (and its pooled Redis connections); log the outage once."""
    if not _outage["down"]:
        _outage["down"] = True
        log.warning("Redis does not answer (%s): live updates are off, websockets are refused "
                    "until it answers again", exc)
    if channel_layers.backends.get("default") is layer:
        channel_layers.backends.pop("default", None)
    close_pools = getattr(layer, "close_pools", None)
    if close_pools is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(close_pools(), timeout=2)


def _sees_run(user: Any, run_id: str) -> bool:
    """Return True when the run exists in a team ``user`` sees."""
    return scoped(Run.objects.filter(pk=run_id), visible_teams(user)).exists()


async def _may_view(user: Any) -> bool:
    return await database_sync_to_async(can_view)(user)
