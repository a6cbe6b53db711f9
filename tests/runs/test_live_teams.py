"""Live push never delivers another team's run: real websockets on the in-memory layer.

A queue page of a team-B member hears nothing when team A's run changes (a committed
change through the engine hook, and an operator action through the console); team A's
member and an installation-wide viewer hear it; a run page of team A's run refuses a team-B
member the same way as a run that does not exist (4404).
"""
from __future__ import annotations

import uuid

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from agentops.routing import websocket_urlpatterns
from approvals.roles import OPERATOR, VIEWER
from approvals.users import membership_set
from runs.models import Team
from runs.services import run_cancel
from tests.console_factories import client_for, make_attention_run, make_user

pytestmark = pytest.mark.django_db(transaction=True)
app = URLRouter(websocket_urlpatterns)


def _socket(path: str, user) -> WebsocketCommunicator:
    comm = WebsocketCommunicator(app, path)
    comm.scope["user"] = user
    return comm


def _teams():
    alpha = Team.objects.create(slug="alpha", name="Alpha")
    beta = Team.objects.create(slug="beta", name="Beta")
    people = {"a": make_user("ann"), "b": make_user("ben"), "all": make_user("ida", VIEWER),
              "op": make_user("olga")}
    membership_set(user=people["a"], team=alpha, role=VIEWER)
    membership_set(user=people["b"], team=beta, role=VIEWER)
    membership_set(user=people["op"], team=alpha, role=OPERATOR)
    return alpha, beta, people


def test_a_queue_page_hears_only_its_teams_runs():
    alpha, beta, people = _teams()
    run_a = make_attention_run(goal="alpha work", team=alpha)
    run_b = make_attention_run(goal="beta work", team=beta)

    async def scenario():
        socks = {k: _socket("/ws/queue/", people[k]) for k in ("a", "b", "all")}
        for sock in socks.values():
            assert (await sock.connect())[0]
        await sync_to_async(run_cancel)(run=run_a, actor=people["op"], reason="test")
        heard_a = await socks["a"].receive_json_from()
        assert heard_a["run_id"] == str(run_a.pk) and heard_a["status"] == "cancelled"
        assert (await socks["all"].receive_json_from())["run_id"] == str(run_a.pk)
        assert await socks["b"].receive_nothing(timeout=0.3)
        await sync_to_async(run_cancel)(run=run_b, actor=people["op"], reason="test")
        assert (await socks["b"].receive_json_from())["run_id"] == str(run_b.pk)
        assert (await socks["all"].receive_json_from())["run_id"] == str(run_b.pk)
        assert await socks["a"].receive_nothing(timeout=0.3)
        for sock in socks.values():
            await sock.disconnect()

    async_to_sync(scenario)()


def test_an_operator_action_reaches_only_the_runs_team():
    alpha, _, people = _teams()
    run_a = make_attention_run(goal="alpha work", team=alpha)
    client = client_for(people["op"])

    async def scenario():
        mine, theirs = _socket("/ws/queue/", people["a"]), _socket("/ws/queue/", people["b"])
        assert (await mine.connect())[0] and (await theirs.connect())[0]
        response = await sync_to_async(client.post)(
            f"/runs/{run_a.pk}/actions/retry/", {"reason": "back up", "seen_seq": run_a.last_seq},
            HTTP_HX_REQUEST="true")
        assert response.status_code == 200, response.content[:300]
        texts = []
        while not await mine.receive_nothing(timeout=0.5):
            texts.append((await mine.receive_json_from()).get("text"))
        assert "olga retried this run" in texts
        assert await theirs.receive_nothing(timeout=0.3)
        await mine.disconnect()
        await theirs.disconnect()

    async_to_sync(scenario)()


def test_a_run_page_of_another_team_is_refused_like_a_missing_run():
    alpha, _, people = _teams()
    run_a = make_attention_run(goal="alpha work", team=alpha)

    async def scenario():
        for user, path in ((people["b"], f"/ws/runs/{run_a.pk}/"),
                           (people["a"], f"/ws/runs/{uuid.uuid4()}/")):
            sock = _socket(path, user)
            connected, code = await sock.connect()
            assert not connected and code == 4404
        sock = _socket(f"/ws/runs/{run_a.pk}/", people["a"])
        assert (await sock.connect())[0]
        await sock.disconnect()

    async_to_sync(scenario)()
