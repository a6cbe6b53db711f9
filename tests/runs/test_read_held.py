"""A reply asking only for quick reads commits once, with their results, before the next model call.

Whatever the model's latency: a step of reads is one unit, written before the run waits on its
model, so the database (and what the console and the API show from it) says the reads are done
while the model thinks. A worker lost in the model call after it loses nothing; one lost while
the held reads run loses the reply with them: the model is asked again and the read runs again
(no row for the lost attempt), and no write happens twice.
"""
import datetime as dt
import re
import time

import pytest
from django.urls import reverse

from agentops.agents import Agent, StepSpec, registry
from agentops.control import RunControl
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from ledger.models import ToolAttempt, ToolCall
from runs.engine.runtime import read_rides, session as session_mod
from runs.engine.runtime.recovery import runs_recover_expired
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.models import Event, Run
from runs.services import run_cancel, run_start
from tests.conftest import drive
from tests.console_factories import client_for, make_role_users

pytestmark = pytest.mark.django_db
reads: list[str] = []
paid: list[int] = []
asked: list[int] = []
seen: dict = {}
how = {"slow_s": 0.0, "crash_turn": 0, "crash_read": "", "look_in_turn": 0, "cancel_read": ""}


class Crash(RunControl):
    """The worker process dies here."""


@tool(effect="read")
def look(ctx, q: str) -> ToolResult:
    """Look something up (counted with its attempt number)."""
    reads.append(f"{q}#{ctx.attempt}")
    if how["crash_read"] == q:
        how["crash_read"] = ""
        raise Crash("killed while the held read runs")
    if how["cancel_read"] == q:
        run_cancel(run=Run.objects.get(pk=ctx.run_id), reason="stop")  # a person, meanwhile
    return ToolResult(facts={"q": q}, summary=f"{q} found")


@tool(effect="write", idempotent=True)
def pay(ctx, amount: int) -> ToolResult:
    """Pay (counted)."""
    paid.append(amount)
    return ToolResult(facts={"paid": amount}, summary="paid")


def _script(ctx):
    asked.append(ctx.turn)
    time.sleep(how["slow_s"])  # the model's latency
    if ctx.turn == how["crash_turn"]:
        how["crash_turn"] = 0
        return Crash("killed during the model call")
    if ctx.turn == how["look_in_turn"]:
        seen.update(_what_a_person_sees(ctx))
    return {1: call("look", q="a"), 2: call("look", q="b"), 3: call("pay", amount=5),
            4: call("look", q="c")}.get(ctx.turn, say("done"))


@pytest.fixture
def agent(engine):
    reads.clear()
    paid.clear()
    asked.clear()
    seen.clear()
    how.update(slow_s=0.0, crash_turn=0, crash_read="", look_in_turn=0, cancel_read="")
    read_rides._last_ms.clear()
    registry.register(Agent(name="held", version="1", system_prompt="t", tools=[look, pay],
                            plan=[StepSpec("s")], model=lambda: ScriptedModel(_script)))
    return "held"


@pytest.fixture
def units(monkeypatch):
    """The event types of each unit written (one commit each), in order."""
    written: list[list[str]] = []
    append, transition = session_mod.event_append, session_mod.run_transition

    def counted_append(**kw):
        written.append([e.type for e in kw["events"]])
        return append(**kw)

    def counted_transition(run, to, **kw):
        written.append([e.type for e in kw["events"]])
        return transition(run, to, **kw)

    monkeypatch.setattr(session_mod, "event_append", counted_append)
    monkeypatch.setattr(session_mod, "run_transition", counted_transition)
    return written


def _warm(agent: str) -> None:
    """Run once, so this process has seen ``look`` answer quickly."""
    assert drive(run_start(agent=agent, goal="warm")) == "succeeded"


def _log(run):
    return list(Event.objects.filter(run=run).order_by("seq").values_list("type", flat=True))


HELD = ["model.replied", "tool.started", "tool.result", "model.requested"]


def test_a_step_of_reads_commits_once_when_the_model_is_slow(agent, units, settings):
    settings.AGENTOPS_READ_RIDE_MS = 50
    _warm(agent)
    units.clear()
    how["slow_s"] = 0.06  # slower than AGENTOPS_READ_RIDE_MS
    run = run_start(agent=agent, goal="g")
    assert drive(run) == "succeeded"
    assert units.count(HELD) == 3  # each read step: one unit, results in before the next call
    assert ["tool.result", "model.requested"] not in units[:2]  # no unit of results alone
    assert reads[-3:] == ["a#1", "b#1", "c#1"]
    settings.AGENTOPS_READ_RIDE_MS = 0
    alone = run_start(agent=agent, goal="g")
    assert drive(alone) == "succeeded"
    assert _log(run) == _log(alone)  # the same log as with every result committed alone
    assert replay_state(run.pk) == load_state(run.pk)


def test_a_worker_lost_in_the_model_call_after_held_reads_keeps_their_results(agent):
    _warm(agent)
    reads.clear()
    paid.clear()
    how["crash_turn"] = 3  # the model call after the second read: a fast one
    run = run_start(agent=agent, goal="g")
    with pytest.raises(Crash):
        drive(run)
    second = ToolCall.objects.get(run=run, tool="look", args={"q": "b"})
    assert second.status == "succeeded"  # committed before the model was asked
    _recover(run)
    assert drive(run) == "succeeded"
    assert reads == ["a#1", "b#1", "c#1"]  # no read run again
    assert paid == [5]
    assert replay_state(run.pk) == load_state(run.pk)


def test_a_worker_lost_while_held_reads_run_asks_its_model_again(agent):
    _warm(agent)
    reads.clear()
    paid.clear()
    asked.clear()
    how["crash_read"] = "b"
    run = run_start(agent=agent, goal="g")
    with pytest.raises(Crash):
        drive(run)
    # Nothing of the lost reply reached the log: the run stands where its model was asked.
    assert not ToolCall.objects.filter(run=run, args={"q": "b"}).exists()
    assert _log(run)[-1] == "model.requested"
    _recover(run)
    assert drive(run) == "succeeded"
    assert asked == [1, 2, 2, 3, 4, 5]  # turn 2 asked again
    assert reads == ["a#1", "b#1", "b#1", "c#1"]  # the lost attempt is in no row
    assert list(ToolAttempt.objects.filter(tool_call__run=run, tool_call__args={"q": "b"})
                .values_list("attempt", "status")) == [(1, "succeeded")]
    assert paid == [5]  # no write twice
    assert replay_state(run.pk) == load_state(run.pk)


def test_a_run_cancelled_while_held_reads_run_records_nothing_of_them(agent):
    _warm(agent)
    reads.clear()
    how["cancel_read"] = "b"
    run = run_start(agent=agent, goal="g")
    assert drive(run) == "cancelled"
    assert reads == ["a#1", "b#1"]
    # The held unit met the cancel's version and wrote nothing: no row, no late result of a
    # call whose reply never reached the log.
    assert not ToolCall.objects.filter(run=run, args={"q": "b"}).exists()
    assert not Event.objects.filter(run=run, type="tool.late_result").exists()
    assert _log(run)[-3:] == ["model.requested", "run.cancelled", "run.status"]
    assert replay_state(run.pk) == load_state(run.pk)


def test_while_the_model_thinks_the_api_and_the_page_show_the_reads_done(agent):
    _warm(agent)
    how["look_in_turn"] = 3  # looked at from inside the model call after the second read
    run = run_start(agent=agent, goal="g")
    assert drive(run) == "succeeded"
    assert seen["calls"] == {"a": "succeeded", "b": "succeeded"}
    assert seen["last_event"] == "model.requested"
    assert seen["page"] == {"a": "succeeded", "b": "succeeded"}


def _recover(run: Run) -> None:
    Run.objects.filter(pk=run.pk).update(
        lease_expires_at=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
    assert runs_recover_expired() == [run.pk]


def _what_a_person_sees(ctx) -> dict:
    """Read the run as the API and the run page show it, while its model is being asked."""
    run = Run.objects.filter(status="running", agent_name="held").exclude(goal="warm").get()
    client = client_for(make_role_users()["operator"])
    calls = client.get(f"/api/runs/{run.pk}/tool-calls").json()
    events = client.get(f"/api/runs/{run.pk}/events").json()["items"]
    html = client.get(reverse("console:run", args=[run.pk])).content.decode()
    page = {}
    for c in calls:
        row = re.search(rf'id="tc-{c["tool_call_id"]}".*?</summary>', html, re.S).group(0)
        page[c["args"]["q"]] = re.search(r'class="pill pill-(\w+)"', row).group(1)
    return {"calls": {c["args"]["q"]: c["status"] for c in calls},
            "last_event": max(events, key=lambda e: e["seq"])["type"], "page": page}
