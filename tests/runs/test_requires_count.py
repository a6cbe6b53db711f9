"""A step that declares a count it must reach: a child that saved 7 of 10 documents says so.

Parent and children run through the engine; the child's shortfall is told to its model once,
then ends the child "completed with exceptions" naming the count, the parent rolls it up, and
the console's run page shows it.
"""
from __future__ import annotations

import pytest
from django.urls import reverse

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, WaitForChildren, tool
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.models import Run
from runs.services import run_start
from runs.sweeper import sweep_once
from tests.conftest import drive
from tests.console_factories import client_for, make_role_users

pytestmark = pytest.mark.django_db
DOCS = [f"doc-{i}" for i in range(10)]
SECOND: list[str] = []  # what a child saves once told what it still lacks


@tool(effect="write", idempotent=True)
def save_docs(ctx, doc_ids: list[str]) -> ToolResult:
    """Save the fields of documents."""
    return ToolResult(facts={"saved": doc_ids}, summary=f"saved {len(doc_ids)} documents")


@tool(effect="read")
def fan_out(ctx, batches: int) -> ToolResult:
    """Start one child run per batch of documents and wait for them all."""
    raise WaitForChildren([{"agent": "count-kid", "goal": f"save batch {i}",
                            "input": {"doc_ids": DOCS}} for i in range(batches)],
                          timeout_s=3600)


def _kid_model() -> ScriptedModel:
    """A child that saves 7 documents, stops, and (told what is missing) saves SECOND."""
    turns = [call("save_docs", doc_ids=DOCS[:7]), say("saved the batch")]
    if SECOND:
        turns.append(call("save_docs", doc_ids=SECOND))
    turns.append(say("done"))
    return ScriptedModel({"save": turns})


def _agents() -> None:
    if registry.has("count-batch", "1"):
        return
    registry.register(Agent(
        name="count-kid", version="1", system_prompt="You save documents.", tools=[save_docs],
        plan=[StepSpec("save", requires_count={"saved": "doc_ids"})],
        model=_kid_model))
    registry.register(Agent(
        name="count-batch", version="1", system_prompt="You run batches.", tools=[fan_out],
        plan=[StepSpec("fan")],
        model=lambda: ScriptedModel({"fan": [call("fan_out", batches=1), say("all saved")]})))


def test_a_child_that_saved_7_of_10_ends_with_exceptions_and_its_parent_says_so(engine):
    _agents()
    parent = run_start(agent="count-batch", goal="save every document")
    assert drive(parent) == "waiting"
    [kid] = Run.objects.filter(parent=parent)
    assert drive(kid) == "completed_with_exceptions"
    kid.refresh_from_db()
    [item] = kid.exceptions
    assert item["kind"] == "count_short" and (item["got"], item["need"]) == (7, 10)
    assert item["what"] == "step save reached 7 of 10 saved; missing: doc-7, doc-8, doc-9"
    told = [e.data for e in kid.events.filter(type="step.incomplete")]
    assert told and told[0]["missing_fields"] == ["count:saved"]
    assert "saved at 7 of 10 (the 10 items of input doc_ids); missing: doc-7, doc-8, doc-9" \
        in told[0]["reason"]  # the model is told which documents it still owes

    operator = make_role_users()["operator"]
    html = client_for(operator).get(reverse("console:run", args=[kid.pk])).content.decode()
    assert "step save reached 7 of 10 saved; missing: doc-7, doc-8, doc-9" in html

    sweep_once()
    assert drive(parent) == "completed_with_exceptions"
    parent.refresh_from_db()
    [rolled] = parent.exceptions
    assert rolled["kind"] == "child_exceptions" and rolled["child"] == str(kid.pk)
    assert "step save reached 7 of 10 saved" in rolled["why"]
    api = client_for(operator).get(f"/api/runs/{parent.pk}").json()
    assert "7 of 10" in str(api)


def test_a_child_told_what_is_missing_that_saves_the_rest_succeeds(engine, monkeypatch):
    _agents()
    monkeypatch.setattr("tests.runs.test_requires_count.SECOND", DOCS[7:])
    parent = run_start(agent="count-batch", goal="save every document")
    assert drive(parent) == "waiting"
    [kid] = Run.objects.filter(parent=parent)
    assert drive(kid) == "succeeded"
    kid.refresh_from_db()
    assert kid.exceptions == []
    sweep_once()
    assert drive(parent) == "succeeded"


def test_saving_the_same_documents_again_does_not_reach_the_count(engine, monkeypatch):
    _agents()
    monkeypatch.setattr("tests.runs.test_requires_count.SECOND", DOCS[:3])  # saved already
    parent = run_start(agent="count-batch", goal="save every document")
    assert drive(parent) == "waiting"
    [kid] = Run.objects.filter(parent=parent)
    assert drive(kid) == "completed_with_exceptions"  # 10 saves, 7 documents
    kid.refresh_from_db()
    [item] = kid.exceptions
    assert (item["got"], item["need"]) == (7, 10)
    assert item["what"] == "step save reached 7 of 10 saved; missing: doc-7, doc-8, doc-9"
    assert replay_state(kid.pk) == load_state(kid.pk)  # the log reduces to the snapshot


def test_a_count_must_be_a_positive_number_or_an_input_name():
    with pytest.raises(ValueError, match="requires_count.*positive number or a run input"):
        Agent(name="bad-count", version="1", system_prompt="", tools=[save_docs],
              plan=[StepSpec("save", requires_count={"saved": 0})])
