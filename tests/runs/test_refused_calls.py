"""A refused call (an unknown tool, a missing argument) never ends its step clean.

The model asked for something the engine refused, then gave up: the write never happened,
so the run may not end "succeeded". With other tools in the step it ends completed with
exceptions naming the refused call; when the step's only tool never succeeded, the step is
incomplete and the run blocks. Seen through the engine and on the run page.
"""
from __future__ import annotations

import pytest
from django.urls import reverse

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from ledger.models import ToolCall
from runs.services import run_start
from tests.conftest import drive
from tests.console_factories import client_for, make_user
from tests.engine_agents import TOOLS, world

pytestmark = pytest.mark.django_db


def _agent(name, replies, step=None, **kw):
    return registry.register(Agent(name=name, version="1", system_prompt="t", tools=TOOLS,
                                   plan=[step or StepSpec("pay")], model=lambda: ScriptedModel({"pay": replies}),
                                   **kw))


def test_refused_call_of_unknown_tool_ends_completed_with_exceptions(engine):
    _agent("misspeller", [call("chargee", amount=42), say("I could not charge it.")])
    run = run_start(agent="misspeller", goal="charge 42")
    assert drive(run) == "completed_with_exceptions"
    assert world.count("charge") == 0
    row = ToolCall.objects.get(run=run)
    assert row.status == "refused"
    [item] = run.exceptions
    assert item["kind"] == "refused_call" and item["tool"] == "chargee"
    assert item["what"] == f"chargee ({row.tool_call_id}) was refused in step pay and never made"
    assert "chargee" in item["why"]


def test_refused_call_missing_argument_then_success_ends_clean(engine):
    _agent("fixer", [call("charge"), call("charge", amount=42), say("charged")])
    run = run_start(agent="fixer", goal="charge 42")
    assert drive(run) == "succeeded"
    assert world.count("charge") == 1 and run.exceptions == []


def test_refused_call_misspelt_then_right_tool_ends_clean(engine):
    _agent("respeller", [call("chrage", amount=42), call("charge", amount=42), say("ok")])
    run = run_start(agent="respeller", goal="charge 42")
    assert drive(run) == "succeeded"
    assert run.exceptions == []


def test_refused_call_of_the_steps_only_tool_blocks_incomplete(engine):
    _agent("only-charge", [call("charge"), say("I gave up.")],
           StepSpec("pay", tools=("charge",)), max_turns_per_step=3)
    run = run_start(agent="only-charge", goal="charge 42")
    assert drive(run) == "blocked"
    assert run.attention_reason == "incomplete_step"
    assert run.attention_detail.startswith("step pay ended without a successful charge "
                                           "(refused: charge: ")
    assert "amount" in run.attention_detail
    assert world.count("charge") == 0


def test_refused_call_shows_on_the_run_page(engine):
    _agent("page-misspeller", [call("chargee", amount=42), say("I could not charge it.")])
    run = run_start(agent="page-misspeller", goal="charge 42")
    drive(run)
    page = client_for(make_user("op", "operators")).get(reverse("console:run", args=[run.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "completed with exceptions" in html
    assert "succeeded" not in html.split("<main", 1)[-1].split("</h1>", 1)[0]
    assert "was refused in step pay and never made" in html
