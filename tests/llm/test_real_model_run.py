"""An agent run end to end through the engine on a real model (Gemma 3 270M, llama.cpp).

The agent declares no model: it gets the one the AGENTOPS_MODEL_* settings describe, with
AGENTOPS_MODEL_TOOL_CHOICE=required forcing each step's one tool (the only way this small
model emits tool calls). Its argument values are often wrong, so this checks the structure
the engine keeps: ledger rows for the calls, tool_call_id pairing in the context, usage.
"""
from __future__ import annotations

import pytest

from agentops.agents import Agent, StepSpec, registry
from agentops.demo import tools
from agentops.llm.openai_compat import OpenAICompatClient
from ledger.models import ToolCall
from runs.engine.core.context import context_build
from runs.engine.runtime.snapshots import load_state
from runs.models import Event
from runs.services import run_start
from runs.statuses import RUNNABLE
from tests.conftest import drive

from .conftest import N_CTX

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400), pytest.mark.django_db]
STEP_TOOLS = {"order": "get_order", "policy": "check_return_policy"}


@pytest.fixture
def real_agent(engine, settings, llama_server):
    """A two-step returns agent whose model factory points at the real llama.cpp server."""
    settings.AGENTOPS_MODEL_BASE_URL = llama_server
    settings.AGENTOPS_MODEL_NAME = "gemma-3-270m"
    settings.AGENTOPS_MODEL_TIMEOUT_S = 120
    settings.AGENTOPS_MODEL_CONTEXT_WINDOW = N_CTX
    settings.AGENTOPS_MODEL_TOOL_CHOICE = "required"
    settings.AGENTOPS_MODEL_MAX_TOKENS = 256
    return registry.register(Agent(
        name="real-returns", version="1",
        system_prompt="You check whether an order can be returned. Call the tool you are given.",
        tools=[tools.get_order, tools.check_return_policy],
        plan=[StepSpec("order", title="Look up the order", tools=("get_order",)),
              StepSpec("policy", title="Check the return policy", depends_on=("order",),
                       tools=("check_return_policy",))]))


def _assert_paired(messages):
    """Every assistant tool call is answered by a tool message with its id, in order."""
    for i, msg in enumerate(messages):
        ids = [c["id"] for c in msg.get("tool_calls") or []]
        answers = [m.get("tool_call_id") for m in messages[i + 1:i + 1 + len(ids)]]
        assert answers == ids, (ids, answers)


def test_demo_agent_runs_through_the_engine_on_a_real_model(real_agent):
    client = real_agent.model_client()
    assert isinstance(client, OpenAICompatClient) and client.options.tool_choice == "required"
    run = run_start(agent="real-returns", goal="Can order A-1001 be returned?",
                    input={"order_id": "A-1001"})
    assert drive(run, max_ticks=40) not in RUNNABLE

    replied = [e.data for e in Event.objects.filter(run=run, type="model.replied")]
    failed = [e.data for e in Event.objects.filter(run=run, type="model.failed")]
    run.refresh_from_db()
    assert replied, (run.status, run.attention_detail, failed)
    assert replied and all(d["usage"]["tokens"] > 0 for d in replied)
    assert run.model_calls >= len(replied) and run.tokens_used >= sum(
        d["usage"]["tokens"] for d in replied)
    calls = [c for d in replied for c in d["calls"]]
    assert calls, "the forced tool was never called"
    assert {c["name"] for c in calls} <= set(STEP_TOOLS.values())

    results = set(Event.objects.filter(run=run, type="tool.result")
                  .values_list("tool_call_id", flat=True))
    assert {c["id"] for c in calls} <= results  # every call got a result (value or error)
    rows = {r.tool_call_id: r for r in ToolCall.objects.filter(run=run)}
    assert set(rows) <= {c["id"] for c in calls}
    for call_id, row in rows.items():
        if row.status == "refused":
            # The small model's arguments did not validate: recorded and answered, never run.
            assert row.error_class == "invalid_arguments" and row.attempts == 0, (call_id, row)
            continue
        assert row.status in ("succeeded", "failed") and row.attempts >= 1, (call_id, row.status)
    assert run.tool_calls == len(rows)
    _assert_paired(context_build(load_state(run.pk), real_agent))
