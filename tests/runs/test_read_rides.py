"""A quick read's result rides the run's next unit: one commit a step, the same log.

A reply asking only for reads of tools this process saw answer quickly holds its unit until
they ran (tests/runs/test_read_held.py); a read of a tool not seen yet opens its attempt in
a unit sent before it runs, and its result rides the next reply's unit. A worker lost
between the read and the unit carrying its result runs the read again as its next attempt;
a write's attempt is committed (with the read results before it) before its effect, and a
write's result is never held back.
"""
import datetime as dt

import pytest

from agentops.agents import Agent, StepSpec, registry
from agentops.control import RunControl
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from ledger.models import ToolAttempt, ToolCall
from runs.engine.runtime import read_rides, session as session_mod, tool_call
from runs.engine.runtime.recovery import runs_recover_expired
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.models import Event, Run
from runs.services import run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db
reads: list[str] = []
paid: list[dict] = []
crash = {"at_turn": 0}


class Crash(RunControl):
    """The worker process dies here."""


@tool(effect="read")
def look(ctx, q: str) -> ToolResult:
    """Look something up (counted)."""
    reads.append(f"{q}#{ctx.attempt}")
    return ToolResult(facts={"q": q}, summary=f"{q} found")


@tool(effect="write", idempotent=True)
def pay(ctx, amount: int) -> ToolResult:
    """Pay; note what the database held when the effect was made."""
    looked = ToolCall.objects.filter(run_id=ctx.run_id, tool="look").order_by("-id").first()
    mine = ToolAttempt.objects.get(tool_call__tool_call_id=ctx.tool_call_id, attempt=ctx.attempt)
    paid.append({"look": looked and looked.status, "my_attempt": mine.status,
                 "result_logged": looked is not None and Event.objects.filter(
                     run_id=ctx.run_id, type="tool.result",
                     tool_call_id=looked.tool_call_id).exists()})
    return ToolResult(facts={"paid": amount}, summary="paid")


def _script(ctx):
    if ctx.turn == crash["at_turn"]:
        crash["at_turn"] = 0
        return Crash("killed during the model call after the read")
    return {1: call("pay", amount=5), 2: call("look", q="a"), 3: call("look", q="b"),
            4: call("pay", amount=6)}.get(ctx.turn, say("done"))


@pytest.fixture
def agent(engine):
    reads.clear()
    paid.clear()
    crash["at_turn"] = 0
    read_rides._last_ms.clear()  # no tool seen yet in this process
    registry.register(Agent(name="rides", version="1", system_prompt="t", tools=[look, pay],
                            plan=[StepSpec("s")], model=lambda: ScriptedModel(_script)))
    return "rides"


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


def _log(run):
    return list(Event.objects.filter(run=run).order_by("seq").values_list("type", flat=True))


def test_quick_reads_commit_with_their_reply_and_the_log_is_the_same(agent, units, settings):
    settings.AGENTOPS_READ_RIDE_MS = 0
    alone = run_start(agent=agent, goal="g")
    assert drive(alone) == "succeeded"
    alone_units = list(units)
    units.clear()
    settings.AGENTOPS_READ_RIDE_MS = 50  # ``look`` answered quickly in this process
    rides = run_start(agent=agent, goal="g")
    assert drive(rides) == "succeeded"

    assert _log(rides) == _log(alone)  # the same events at the same positions
    settled_alone = ["tool.result", "model.requested"]
    assert alone_units.count(settled_alone) == 4  # every result committed on its own
    assert units.count(settled_alone) == 2  # the writes' results only
    # Each read step is one unit: its reply, the attempt, the result and the next request.
    assert units.count(["model.replied", "tool.started", "tool.result", "model.requested"]) == 2
    assert len(units) == len(alone_units) - 2
    assert replay_state(rides.pk) == load_state(rides.pk)


def test_a_read_of_a_tool_not_seen_yet_rides_the_next_reply(agent, units):
    run = run_start(agent=agent, goal="g")
    assert drive(run) == "succeeded"
    # ``look`` not seen yet: its attempt opened in the reply's unit, sent before it ran, and
    # its result rode the next reply's unit. That reply was not held for the second read
    # although ``look`` was now seen quick: a result was riding, and a read may look at the
    # ledger, so the reply's unit went out first, with it.
    assert units.count(["tool.result", "model.requested", "model.replied", "tool.started"]) == 1
    assert ["tool.result", "model.requested", "model.replied"] in units  # before the write
    assert units.count(["tool.result", "model.requested"]) == 2  # the writes' results only
    assert replay_state(run.pk) == load_state(run.pk)


def test_a_write_commits_its_attempt_and_the_read_results_before_its_effect(agent, units):
    run = run_start(agent=agent, goal="g")
    assert drive(run) == "succeeded"
    # The second payment followed a read whose result rode its reply's unit, the fenced
    # unit opening the payment's attempt: both were in the database before the effect.
    assert paid[1] == {"look": "succeeded", "result_logged": True, "my_attempt": "running"}
    assert [c["my_attempt"] for c in paid] == ["running", "running"]


def test_a_worker_lost_before_the_unit_carrying_a_read_result_runs_the_read_again(
        agent, units, monkeypatch):
    monkeypatch.setattr(tool_call, "reads_held", lambda session, calls: False)  # rides only
    crash["at_turn"] = 4  # dies in the model call after the second read, before its result
    run = run_start(agent=agent, goal="g")
    with pytest.raises(Crash):
        drive(run)
    assert Run.objects.get(pk=run.pk).status == "running"
    second = ToolCall.objects.get(run=run, tool="look", args={"q": "b"})
    assert second.status == "running"  # its attempt open, its result never committed
    Run.objects.filter(pk=run.pk).update(
        lease_expires_at=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
    assert runs_recover_expired() == [run.pk]
    assert drive(run) == "succeeded"

    assert reads == ["a#1", "b#1", "b#2"]  # the lost read again, as its next attempt
    assert [p["my_attempt"] for p in paid] == ["running", "running"]  # no write repeated
    assert ToolCall.objects.filter(run=run, tool="pay").count() == 2
    attempts = list(ToolAttempt.objects.filter(tool_call=second).order_by("attempt")
                    .values_list("attempt", "status", "error_class"))
    assert attempts == [(1, "timed_out", "worker_lost"), (2, "succeeded", "")]
    events = list(Event.objects.filter(run=run, tool_call_id=second.tool_call_id)
                  .order_by("seq").values_list("type", "attempt"))
    assert events == [("tool.started", 1), ("tool.attempt_failed", 1),
                      ("tool.started", 2), ("tool.result", 2)]
    assert replay_state(run.pk) == load_state(run.pk)
