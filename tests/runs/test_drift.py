"""The goal-drift guard: a drifting action pauses the run with evidence; a faithful one runs."""
import json

import pytest

from agentops.llm.scripted import ScriptedModel, call, say
from runs.engine.core.context import context_build
from runs.engine.runtime.drift import DRIFT_MARK, drift_reply
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.models import Event
from runs.services import run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db


def _scorer(prompts: list[str]) -> ScriptedModel:
    """A scorer that reads the action from the drift prompt: shipping serves the goal, email not."""

    def score(ctx):
        check = ctx.messages[-1]["content"]
        assert check.startswith(DRIFT_MARK) and ctx.goal == "ship order o-1"
        prompts.append(check)
        if "email(" in check:
            return drift_reply(0.1, "emailing a stranger does not ship the order")
        return drift_reply(0.9, "shipping the order is the goal")

    return ScriptedModel(score)


def _agent(engine, name: str, script: dict, prompts: list[str], **kw):
    return engine.make_agent(name, script, plan=["work"], drift_threshold=0.5,
                             drift_model=lambda: _scorer(prompts), **kw)


def test_a_drifting_write_pauses_the_run_with_score_goal_and_action(engine):
    prompts: list[str] = []
    script = {"work": [call("lookup", item="o-1"), call("email", to="x@spam.example"), say("ok")]}
    _agent(engine, "drifter", script, prompts)
    run = run_start(agent="drifter", goal="ship order o-1")
    assert drive(run) == "blocked"
    assert run.attention_reason == "drift"
    assert "0.10" in run.attention_detail and "threshold 0.50" in run.attention_detail
    assert "Goal: ship order o-1" in run.attention_detail
    assert "email(to='x@spam.example')" in run.attention_detail
    assert engine.world.count("email") == 0
    assert len(prompts) == 1  # the read was not scored: drift_every is 0 (before writes only)
    scored = Event.objects.get(run=run, type="guard.drift_scored").data
    assert scored["score"] == 0.1 and "stranger" in scored["reason"]
    assert replay_state(run.pk) == load_state(run.pk)


def test_a_faithful_run_is_scored_and_not_paused(engine):
    prompts: list[str] = []
    script = {"work": [call("ship", order="o-1"), say("shipped")]}
    _agent(engine, "faithful", script, prompts)
    run = run_start(agent="faithful", goal="ship order o-1")
    assert drive(run) == "succeeded"
    assert engine.world.count("ship") == 1
    assert [e.data["score"] for e in Event.objects.filter(run=run, type="guard.drift_scored")] == [0.9]


def test_the_score_never_enters_the_main_context_but_its_tokens_count(engine):
    prompts: list[str] = []
    script = {"work": [call("ship", order="o-1"), say("shipped")]}
    agent = _agent(engine, "counted", script, prompts)
    engine.make_agent("uncounted", script, plan=["work"])
    run = run_start(agent="counted", goal="ship order o-1")
    other = run_start(agent="uncounted", goal="ship order o-1")
    assert drive(run) == "succeeded" and drive(other) == "succeeded"
    assert run.tokens_used == other.tokens_used + 50  # drift_reply's usage: 40 + 10
    assert run.model_calls == other.model_calls
    text = json.dumps(context_build(load_state(run.pk), agent))
    assert "shipping the order is the goal" not in text and "0.9" not in text


def test_every_n_turns_scores_reads_too_and_budget_includes_scoring(engine):
    prompts: list[str] = []
    script = {"work": [call("lookup", item=str(i)) for i in range(4)] + [say("ok")]}
    _agent(engine, "periodic", script, prompts, drift_every=2)
    run = run_start(agent="periodic", goal="ship order o-1")
    assert drive(run) == "succeeded"
    turns = [e.data["turn"] for e in Event.objects.filter(run=run, type="guard.drift_scored")]
    assert turns and all(t % 2 == 0 for t in turns)


def test_an_unusable_scorer_reply_is_recorded_and_does_not_stop_the_run(engine):
    script = {"work": [call("ship", order="o-1"), say("shipped")]}
    engine.make_agent("mumbler", script, plan=["work"], drift_threshold=0.5,
                      drift_model=lambda: ScriptedModel(lambda ctx: say("looks fine to me")))
    run = run_start(agent="mumbler", goal="ship order o-1")
    assert drive(run) == "succeeded"
    scored = Event.objects.get(run=run, type="guard.drift_scored").data
    assert scored["score"] is None and "no JSON object" in scored["error"]
