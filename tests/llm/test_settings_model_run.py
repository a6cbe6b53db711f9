"""An agent with no model code runs on the model its settings name, through the engine.

Both providers' real SDK clients talk to a local fake server; the engine forces the step's
tool when AGENTOPS_MODEL_TOOL_CHOICE=required, and streamed text reaches the run page's
websocket while the reply is generated.
"""
from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from agentops.agents import Agent, StepSpec, registry
from agentops.routing import websocket_urlpatterns
from agentops.tools import ToolResult, tool
from ledger.models import ToolCall
from runs.models import Event
from runs.services import run_start
from tests.conftest import drive
from tests.console_factories import make_role_users

from .fakes import an_message, fake_provider, oa_completion, oa_stream


@tool(effect="read")
def lookup_order(ctx, order_id: str) -> ToolResult:
    """Look up an order.

    Args:
        order_id: the order number, like A-1001.
    """
    return ToolResult(facts={"order_id": order_id, "status": "delivered"}, summary="delivered")


@tool(effect="write", idempotent=True)
def cancel_order(ctx, order_id: str) -> ToolResult:
    """Cancel an order (never offered in the look-up step)."""
    raise AssertionError("the look-up step must not offer cancel_order")


def _agent(name: str) -> Agent:
    return registry.register(Agent(
        name=name, version="1", system_prompt="You look up orders.",
        tools=[lookup_order, cancel_order],
        plan=[StepSpec("look", title="Look the order up", tools=("lookup_order",))]))


@pytest.mark.django_db
def test_anthropic_from_settings_with_forced_tool(engine, settings):
    with fake_provider() as fake:
        settings.AGENTOPS_MODEL_PROVIDER = "anthropic"
        settings.AGENTOPS_MODEL_BASE_URL = fake.base_url
        settings.AGENTOPS_MODEL_NAME = "claude-fake"
        settings.AGENTOPS_MODEL_API_KEY = "sk-ant-x"
        settings.AGENTOPS_MODEL_TOOL_CHOICE = "required"
        fake.push(an_message(calls=[("lookup_order", {"order_id": "A-1001"})]),
                  an_message(text="Order A-1001 was delivered."))
        _agent("claude-orders")
        run = run_start(agent="claude-orders", goal="Where is A-1001?")
        assert drive(run) == "succeeded"

    first, second = (r["json"] for r in fake.requests)
    assert first["tool_choice"] == {"type": "tool", "name": "lookup_order"}
    assert [t["name"] for t in first["tools"]] == ["lookup_order"]  # the step's tools only
    assert first["tools"][0]["input_schema"]["properties"]["order_id"]["description"] == (
        "the order number, like A-1001.")
    assert "You look up orders." in first["system"]
    # The forced turn is done: the model is offered no tools and answers in text.
    assert "tools" not in second and "tool_choice" not in second
    use = next(b for m in second["messages"] for b in m["content"] if b["type"] == "tool_use")
    result = next(b for m in second["messages"] for b in m["content"] if b["type"] == "tool_result")
    assert result["tool_use_id"] == use["id"] and "delivered" in result["content"]
    row = ToolCall.objects.get(run=run)
    assert row.tool == "lookup_order" and row.status == "succeeded"
    assert row.args == {"order_id": "A-1001"}
    run.refresh_from_db()
    assert run.tokens_used == 2 * (20 + 7) and run.model_calls == 2


@pytest.mark.django_db
def test_repairs_are_recorded_on_the_reply_event(engine, settings):
    with fake_provider("/v1") as fake:
        settings.AGENTOPS_MODEL_BASE_URL = fake.base_url
        settings.AGENTOPS_MODEL_NAME = "fake-model"
        settings.AGENTOPS_MODEL_TOOL_CHOICE = "required"
        settings.AGENTOPS_MODEL_REPAIR_TURNS = 1
        fake.push(oa_completion(calls=[("lookup_order", {"order": "A-1"})]),
                  oa_completion(calls=[("lookup_order", {"order_id": "A-1"})]),
                  oa_completion(text="done"))
        _agent("repairing-orders")
        run = run_start(agent="repairing-orders", goal="Where is A-1?")
        assert drive(run) == "succeeded"
    replied = Event.objects.filter(run=run, type="model.replied").order_by("seq").first().data
    assert replied["calls"][0]["args"] == {"order_id": "A-1"}
    assert "'order_id' is a required property" in replied["repairs"][0]


@pytest.mark.django_db(transaction=True)
def test_streamed_text_reaches_the_run_page(engine, settings):
    users = make_role_users()
    app = URLRouter(websocket_urlpatterns)
    with fake_provider("/v1") as fake:
        settings.AGENTOPS_MODEL_BASE_URL = fake.base_url
        settings.AGENTOPS_MODEL_NAME = "fake-model"
        settings.AGENTOPS_MODEL_STREAM = True
        fake.push(oa_stream(["Looking ", "it up"], call=("lookup_order", '{"order_id": "B-2"}')),
                  oa_stream(["B-2 ", "was ", "delivered."]))
        _agent("streaming-orders")
        run = run_start(agent="streaming-orders", goal="Where is B-2?")

        async def scenario():
            page = WebsocketCommunicator(app, f"/ws/runs/{run.pk}/")
            page.scope["user"] = users["viewer"]
            assert (await page.connect())[0]
            assert await sync_to_async(drive)(run) == "succeeded"
            texts = []
            while not await page.receive_nothing(timeout=0.3):
                msg = await page.receive_json_from()
                if msg["type"] == "model.text":
                    texts.append((msg["step"], msg["text"]))
            await page.disconnect()
            return texts

        texts = async_to_sync(scenario)()
    assert "".join(t for _, t in texts) == "Looking it upB-2 was delivered."
    assert {step for step, _ in texts} == {"look"}
    final = Event.objects.filter(run=run, type="step.completed").get().data
    assert final["output"]["text"] == "B-2 was delivered."
