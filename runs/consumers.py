"""Websocket consumers: pages hear committed run changes (who did what); run pages share presence."""
from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from approvals.roles import can_view
from runs.live import QUEUE_GROUP, run_group

_FORBIDDEN = 4403


class QueueConsumer(AsyncJsonWebsocketConsumer):
    """Push run changes (``runs.live``) to the queue and inbox pages."""

    groups_joined: list[str]

    async def connect(self) -> None:
        """Accept signed-in viewers and join the queue group."""
        user = self.scope.get("user")
        if not await _may_view(user):
            await self.close(code=_FORBIDDEN)
            return
        self.groups_joined = [QUEUE_GROUP]
        await self.channel_layer.group_add(QUEUE_GROUP, self.channel_name)
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


async def _may_view(user: Any) -> bool:
    return await database_sync_to_async(can_view)(user)
