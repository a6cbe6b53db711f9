"""A real model (Gemma 3 270M, llama.cpp) that never calls the step's required tool does not
end the run clean: it is told what is missing, asked again, then the run blocks.

The step offers only ``get_order`` (``StepSpec.tools``); with ``tool_choice="required"`` the
first turn forces it (the only way this small model emits a tool call) and later turns offer no
tools, so ``issue_refund`` — the tool the step declares it needs — is never called, whatever
the model writes. The agent has no ``model=``: it gets the real model from settings.
"""
from __future__ import annotations

import pytest

from agentops.agents import Agent, StepSpec, registry
from agentops.demo import tools
from ledger.models import ToolCall
from runs.models import Event
from runs.services import run_start
from tests.conftest import drive

from .conftest import N_CTX

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400), pytest.mark.django_db]


@pytest.fixture
def talker(engine, settings, llama_server):
    """A one-step refund agent on the real model; its step requires issue_refund."""
    settings.AGENTOPS_MODEL_BASE_URL = llama_server
    settings.AGENTOPS_MODEL_NAME = "gemma-3-270m"
    settings.AGENTOPS_MODEL_TIMEOUT_S = 120
    settings.AGENTOPS_MODEL_CONTEXT_WINDOW = N_CTX
    settings.AGENTOPS_MODEL_TOOL_CHOICE = "required"
    return registry.register(Agent(
        name="real-refund-talker", version="1",
        system_prompt="You refund orders. Say what you did.",
        tools=[tools.get_order, tools.issue_refund],
        plan=[StepSpec("refund", title="Refund the customer", tools=("get_order",),
                       requires_tools=("issue_refund",))],
        max_turns_per_step=4))


def test_a_real_model_that_never_calls_the_required_tool_does_not_end_clean(talker):
    run = run_start(agent="real-refund-talker", goal="Refund order A-1001",
                    input={"order_id": "A-1001"})
    status = drive(run, max_ticks=60)
    assert status not in ("succeeded", "completed_with_exceptions")
    assert status == "blocked" and run.attention_reason == "incomplete_step"
    assert run.attention_detail.startswith("step refund ended without a successful issue_refund")
    assert not ToolCall.objects.filter(run=run, tool="issue_refund").exists()
    told = Event.objects.filter(run=run, type="step.incomplete")
    assert told.exists() and all(e.data["missing_fields"] == ["tool:issue_refund"] for e in told)
    assert Event.objects.filter(run=run, type="model.replied").count() == 4
