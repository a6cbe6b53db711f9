"""The five regression cases of the engine issue."""
import json
import random

import pytest

from agentops.llm.scripted import calls, say
from ledger.artifacts import artifact_read
from ledger.models import ToolAttempt, ToolCall
from runs.engine.core.context import MISSING_NOTE, context_build
from runs.engine.runtime.snapshots import load_state
from runs.services import run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db


def test_parallel_completions_in_shuffled_order_map_to_the_right_ids(engine, monkeypatch):
    from ledger.services import execute

    real = execute.run_calls

    def shuffled(jobs, secrets, *rest):
        order = list(range(len(jobs)))
        random.Random(7).shuffle(order)
        outcomes = {i: real([jobs[i]], secrets, *rest)[0] for i in order}  # complete in shuffled order
        return [outcomes[i] for i in range(len(jobs))]

    monkeypatch.setattr("runs.engine.runtime.tool_call.run_calls", shuffled)
    items = ["a", "b", "c", "d", "e"]
    script = {"s": [calls(*[("lookup", {"item": i}) for i in items]), say("ok")]}
    engine.make_agent("par", script, plan=["s"])
    run = run_start(agent="par", goal="g")
    assert drive(run) == "succeeded"
    turn = load_state(run.pk)["turns"][0]
    for call in turn["calls"]:
        assert call["result"]["facts"]["item"] == call["args"]["item"]
        row = ToolCall.objects.get(tool_call_id=call["id"])
        assert row.facts["item"] == row.args["item"]


def test_first_attempt_times_out_second_succeeds(engine):
    from ledger.errors import ToolTimeout

    engine.world.fail_next["lookup"] = [ToolTimeout("slow")]
    engine.make_agent("retry", {"s": [calls(("lookup", {"item": "x"})), say("ok")]}, plan=["s"])
    run = run_start(agent="retry", goal="g")
    assert drive(run) == "succeeded"
    state = load_state(run.pk)
    messages = context_build(state, engine.make_agent("retry", {}, plan=["s"]))
    tool_msgs = [m for m in messages if m["role"] == "tool"]
    assert len(tool_msgs) == 1 and json.loads(tool_msgs[0]["content"])["status"] == "succeeded"
    call = ToolCall.objects.get(run=run)
    attempts = ToolAttempt.objects.filter(tool_call=call).order_by("attempt")
    assert [(a.attempt, a.status) for a in attempts] == [(1, "timed_out"), (2, "succeeded")]
    assert call.tool_call_id == tool_msgs[0]["tool_call_id"]


def test_partial_success_names_missing_fields_and_says_not_to_guess(engine):
    engine.make_agent("part", {"s": [calls(("partial", {"item": "x"})), say("ok")]}, plan=["s"])
    run = run_start(agent="part", goal="g")
    assert drive(run) == "succeeded"
    state = load_state(run.pk)
    msg = [m for m in context_build(state, engine.make_agent("part", {}, plan=["s"]))
           if m["role"] == "tool"][0]
    body = json.loads(msg["content"])
    assert body["missing_fields"] == ["price", "stock"]
    assert body["note"] == MISSING_NOTE
    assert "price" not in body["facts"]


def test_same_write_result_delivered_twice_is_one_fact(engine):
    script = {"s": [calls(("charge", {"amount": 5})), calls(("charge", {"amount": 5})), say("ok")]}
    engine.make_agent("twice", script, plan=["s"])
    run = run_start(agent="twice", goal="g")
    assert drive(run) == "succeeded"
    assert engine.world.count("charge") == 1
    assert ToolCall.objects.filter(run=run, tool="charge").count() == 1
    state = load_state(run.pk)
    second = state["turns"][1]["calls"][0]["result"]
    assert second["deduplicated"] and second["same_as"] == state["turns"][0]["calls"][0]["id"]
    assert len(state["facts"]) == 1


def test_oversized_result_keeps_summary_and_facts_only_rest_by_expand(engine, settings):
    settings.AGENTOPS_INLINE_RESULT_BYTES = 2_000
    engine.make_agent("big", {"s": [calls(("big", {"n": 500})), say("ok")]}, plan=["s"])
    run = run_start(agent="big", goal="g")
    assert drive(run) == "succeeded"
    call = ToolCall.objects.get(run=run)
    assert call.artifact_sha256
    state = load_state(run.pk)
    in_context = json.dumps(context_build(state, engine.make_agent("big", {}, plan=["s"])))
    assert "xxxxxxxxxx" not in in_context and "500 rows" in in_context
    full = artifact_read(call.artifact_sha256)
    assert b"raw raw" in full and full.count(b'"text"') >= 500
