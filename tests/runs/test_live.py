"""Live updates: the websocket consumers (run changes, presence) and live_notify_run."""
from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.db import transaction

from agentops.routing import websocket_urlpatterns
from runs.live import live_notify_run
from tests.console_factories import make_role_users
from tests.factories import make_run

pytestmark = pytest.mark.django_db(transaction=True)
app = URLRouter(websocket_urlpatterns)


def _communicator(path: str, user) -> WebsocketCommunicator:
    comm = WebsocketCommunicator(app, path)
    comm.scope["user"] = user
    return comm


def test_anonymous_websocket_is_closed():
    async def scenario():
        comm = _communicator("/ws/queue/", AnonymousUser())
        connected, code = await comm.connect()
        assert not connected and code == 4403

    async_to_sync(scenario)()


def _notify(run_id, *, fail: bool = False) -> None:
    """Announce a change inside a transaction that commits (or fails)."""
    try:
        with transaction.atomic():
            live_notify_run(run_id)
            if fail:
                raise RuntimeError("unit of work failed")
    except RuntimeError:
        pass


def test_viewers_see_each_other_and_hear_committed_changes():
    users = make_role_users()
    run = make_run()
    path = f"/ws/runs/{run.pk}/"

    async def scenario():
        alice = _communicator(path, users["viewer"])
        assert (await alice.connect())[0]
        bob = _communicator(path, users["operator"])
        assert (await bob.connect())[0]
        assert await alice.receive_json_from() == {"type": "presence", "users": ["operator"]}
        assert await bob.receive_json_from() == {"type": "presence", "users": ["viewer"]}
        queue = _communicator("/ws/queue/", users["support"])
        assert (await queue.connect())[0]
        await sync_to_async(_notify)(run.pk)
        expected = {"type": "run.changed", "run_id": str(run.pk)}
        assert await alice.receive_json_from() == expected
        assert await queue.receive_json_from() == expected
        await bob.disconnect()
        assert await alice.receive_json_from() == {"type": "presence", "users": []}
        await alice.disconnect()
        await queue.disconnect()

    async_to_sync(scenario)()


def test_nothing_is_sent_when_the_transaction_rolls_back():
    users = make_role_users()
    run = make_run()

    async def scenario():
        comm = _communicator("/ws/queue/", users["viewer"])
        assert (await comm.connect())[0]
        await sync_to_async(_notify)(run.pk, fail=True)
        assert await comm.receive_nothing(timeout=0.2)
        await comm.disconnect()

    async_to_sync(scenario)()
