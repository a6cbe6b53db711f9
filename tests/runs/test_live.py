"""Live updates: committed run changes reach the websocket consumers through the real paths.

The engine hook (every commit of a run), an operator action through the console (who did
what) and a rolled-back change (nothing sent) are driven end to end on the in-memory layer.
"""
from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.db import transaction

from agentops.routing import websocket_urlpatterns
from runs.engine.runtime.events import NewEvent, event_append
from runs.services import run_cancel
from tests.console_factories import client_for, make_attention_run, make_role_users
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


def test_viewers_see_each_other_and_hear_a_committed_status_change():
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
        await sync_to_async(run_cancel)(run=run, actor=users["admin"], reason="test")
        expected = {"type": "run.changed", "run_id": str(run.pk), "status": "cancelled",
                    "actor": "admin"}
        assert await alice.receive_json_from() == expected
        assert await queue.receive_json_from() == expected
        await bob.disconnect()
        assert await alice.receive_json_from() == {"type": "presence", "users": []}
        await alice.disconnect()
        await queue.disconnect()

    async_to_sync(scenario)()


def _append_then(run, *, fail: bool) -> None:
    try:
        with transaction.atomic():
            event_append(run=run, events=[NewEvent("signal.received", {"name": "x"})])
            if fail:
                raise RuntimeError("unit of work failed")
    except RuntimeError:
        pass


def test_an_event_is_pushed_after_commit_and_never_for_a_rollback():
    users = make_role_users()
    run = make_run()

    async def scenario():
        comm = _communicator("/ws/queue/", users["viewer"])
        assert (await comm.connect())[0]
        await sync_to_async(_append_then)(run, fail=True)
        assert await comm.receive_nothing(timeout=0.2)
        await sync_to_async(_append_then)(run, fail=False)
        assert await comm.receive_json_from() == {"type": "run.changed", "run_id": str(run.pk)}
        await comm.disconnect()

    async_to_sync(scenario)()


def test_an_operator_action_says_who_did_what():
    users = make_role_users()
    run = make_attention_run()
    client = client_for(users["operator"])

    async def scenario():
        comm = _communicator(f"/ws/runs/{run.pk}/", users["viewer"])
        assert (await comm.connect())[0]
        response = await sync_to_async(client.post)(
            f"/runs/{run.pk}/actions/retry/", {"reason": "provider is back", "seen_seq": run.last_seq},
            HTTP_HX_REQUEST="true")
        assert response.status_code == 200, response.content[:500]
        messages = []
        while not await comm.receive_nothing(timeout=0.5):
            messages.append(await comm.receive_json_from())
        texts = [m.get("text") for m in messages if m.get("text")]
        assert texts == ["operator retried this run"], messages
        await comm.disconnect()

    async_to_sync(scenario)()


def test_a_stale_dialog_names_who_changed_the_run_instead_of_not_allowed():
    from approvals.roles import OPERATOR
    from tests.console_factories import make_user

    users = make_role_users()
    other = make_user("bob", OPERATOR)
    run = make_attention_run()
    seen = run.last_seq
    url = f"/runs/{run.pk}/actions/retry/"
    assert client_for(users["operator"]).post(
        url, {"reason": "back up", "seen_seq": seen}, HTTP_HX_REQUEST="true").status_code == 200
    response = client_for(other).post(url, {"reason": "me too", "seen_seq": seen},
                                      HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 409
    assert "Operator retried this run" in body and "s ago" in body and "nothing was done" in body
    assert "data-reload" in body


def test_nothing_is_sent_or_prepared_while_no_page_of_this_process_listens(monkeypatch):
    """The in-memory layer with no group at all: the engine hook returns at once (no message
    on commit, no read-ahead of a unit in flight) and drops what it coalesced for the run."""
    from django.db import connection

    from runs import live

    monkeypatch.setattr(live._channel_layer(), "groups", {})
    monkeypatch.setitem(live._pending, "run-x", {live._TEAM: None})
    read_ahead: list[int] = []
    with transaction.atomic():
        live.live_run_changed("run-x", lease_holder=True, before_send=lambda: read_ahead.append(1))
        live.live_run_changed("run-x", status="running", before_send=lambda: read_ahead.append(1))
        assert not connection.run_on_commit
    assert read_ahead == [] and "run-x" not in live._pending
