"""A batch of reads' attempts opens in a unit SENT before they run, not confirmed first.

Through the real engine on PostgreSQL outside a transaction (a worker's autocommit
connection, where units go out without waiting, runs.engine.runtime.unit_overlap): the
fenced unit opening only read attempts is sent and the reads run while PostgreSQL commits
it; a write's attempt is committed, with every unit before it read, before its effect (seen
from another connection); the log is the same event for event; a unit that did not commit
stops the worker at its next unit with nothing after it written, and recovery runs the read
again under the same attempt number while no write repeats.
"""
from __future__ import annotations

import datetime as dt

import psycopg
import pytest
from django.db import connection

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from ledger.models import ToolAttempt, ToolCall
from runs.engine.runtime import read_rides, tool_call, unit_overlap
from runs.engine.runtime.loop import run_tick
from runs.engine.runtime.recovery import runs_recover_expired
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.models import Event, Run
from runs.services import run_start

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
reads: list[str] = []
paid: list[dict] = []


def _other() -> psycopg.Connection:
    """Another connection: it sees only what committed."""
    s = connection.settings_dict
    return psycopg.connect(host=s["HOST"] or "127.0.0.1", port=s["PORT"] or 5432,
                           user=s["USER"], dbname=s["NAME"], autocommit=True)


@tool(effect="read")
def look(ctx, q: str) -> ToolResult:
    """Look something up (counted, with its attempt number)."""
    reads.append(f"{q}#{ctx.attempt}")
    return ToolResult(facts={"q": q}, summary=f"{q} found")


@tool(effect="write", idempotent=True)
def pay(ctx, amount: int) -> ToolResult:
    """Pay; note what ANOTHER connection sees committed when the effect is made."""
    with _other() as other:
        mine = other.execute(
            "SELECT a.status FROM ledger_toolattempt a JOIN ledger_toolcall c "
            "ON c.id = a.tool_call_id WHERE c.tool_call_id = %s AND a.attempt = %s",
            [ctx.tool_call_id, ctx.attempt]).fetchone()
        looks = other.execute(
            "SELECT c.status, EXISTS (SELECT 1 FROM runs_event e WHERE e.run_id = c.run_id "
            "AND e.type = 'tool.result' AND e.tool_call_id = c.tool_call_id) FROM "
            "ledger_toolcall c WHERE c.run_id = %s AND c.tool = 'look' ORDER BY c.id",
            [ctx.run_id]).fetchall()
    paid.append({"my_attempt": mine and mine[0], "looks": looks})
    return ToolResult(facts={"paid": amount}, summary="paid")


def _script(ctx):
    return {1: call("look", q="a"), 2: call("pay", amount=5), 3: call("look", q="b"),
            4: call("look", q="c"), 5: call("pay", amount=6)}.get(ctx.turn, say("done"))


@pytest.fixture
def agent(engine):
    reads.clear()
    paid.clear()
    registry.register(Agent(name="sent-reads", version="1", system_prompt="t",
                            tools=[look, pay], plan=[StepSpec("s")],
                            model=lambda: ScriptedModel(_script)))
    return "sent-reads"


@pytest.fixture
def unheld(monkeypatch):
    """No reply held for its reads: every read opens its attempt in a unit sent before it runs,
    as for a tool this process has not seen answer quickly yet (held replies: the last test)."""
    monkeypatch.setattr(tool_call, "reads_held", lambda session, calls: False)


@pytest.fixture
def sent(monkeypatch):
    """Each unit sent without waiting: True when it was a fence (it checks the lease owner)."""
    fences: list[bool] = []
    real = unit_overlap.unit_send

    def send(raw, sql, params, what, on_row, **kw):
        fences.append('"lease_owner" = ' in sql)
        real(raw, sql, params, what, on_row, **kw)

    monkeypatch.setattr(unit_overlap, "unit_send", send)
    return fences


def _log(run_id):
    return list(Event.objects.filter(run_id=run_id).order_by("seq").values_list(
        "type", "attempt"))


def _drive(run_id) -> str:
    for _ in range(20):
        status = Run.objects.get(pk=run_id).status
        if status not in ("queued", "running"):
            return status
        run_tick(run_id, worker="w-sent")
    return Run.objects.get(pk=run_id).status


def test_reads_attempts_are_sent_writes_confirmed_and_the_log_is_the_same(unheld, agent, sent,
                                                                           settings):
    settings.AGENTOPS_UNIT_OVERLAP = False
    waited = run_start(agent=agent, goal="g").pk
    assert _drive(waited) == "succeeded"
    assert sent == []
    settings.AGENTOPS_UNIT_OVERLAP = True
    run = run_start(agent=agent, goal="g").pk
    assert _drive(run) == "succeeded"

    assert _log(run) == _log(waited)  # event for event, attempt numbers included
    assert sent.count(True) == 3  # the three reads' fences went out; the two writes' did not
    assert reads == ["a#1", "b#1", "c#1"] * 2
    # The write saw, from another connection, its own attempt open and every read before it
    # settled, result logged: the units sent before it were read (committed) first.
    assert paid[2:] == [{"my_attempt": "running", "looks": [("succeeded", True)]},
                        {"my_attempt": "running", "looks": [("succeeded", True)] * 3}]
    attempts = ToolAttempt.objects.filter(tool_call__run_id=run)
    assert sorted(attempts.values_list("attempt", "status")) == [(1, "succeeded")] * 5
    assert replay_state(run) == load_state(run)


@pytest.mark.parametrize("bound", [1, 2], ids=["one-in-flight", "two-in-flight"])
def test_a_read_fence_that_did_not_commit_stops_the_worker_and_recovery_reads_again(unheld,
        agent, monkeypatch, settings, bound):
    """The run changes (another writer) just before the second read's fence goes out: that
    unit does not commit, the read runs anyway (it was sent), the worker learns it when the
    unit is read (at its next unit; with two in flight, one unit later, after the next read
    ran too) and writes nothing more; recovery asks the model again and runs the reads again
    under the same attempt numbers (their fences did not commit); no write repeats."""
    settings.AGENTOPS_UNITS_IN_FLIGHT = bound
    ahead = ["c#1"] if bound == 2 else []  # read before the worker learnt it: no side effect
    run = run_start(agent=agent, goal="g").pk
    real, seen = unit_overlap.unit_send, {"fences": 0, "seq": None}

    def send(raw, sql, params, what, on_row, **kw):
        if '"lease_owner" = ' in sql:
            seen["fences"] += 1
            if seen["fences"] == 2:  # look b's
                with _other() as other:
                    seen["seq"] = other.execute(
                        "UPDATE runs_run SET version = version + 1 WHERE id = %s "
                        "RETURNING last_seq", [run]).fetchone()[0]
        real(raw, sql, params, what, on_row, **kw)

    monkeypatch.setattr(unit_overlap, "unit_send", send)
    assert run_tick(run, worker="w-sent") == "lease_lost"
    assert reads == ["a#1", "b#1", *ahead]  # sent before it ran: b ran, its fence never committed
    last = Event.objects.filter(run_id=run).order_by("-seq").values_list("seq", flat=True)
    assert last.first() == seen["seq"]  # nothing written after the unit that did not commit
    assert not ToolCall.objects.filter(run_id=run, args={"q": "b"}).exists()
    assert [p["my_attempt"] for p in paid] == ["running"]

    monkeypatch.setattr(unit_overlap, "unit_send", real)
    Run.objects.filter(pk=run).update(
        lease_expires_at=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
    assert runs_recover_expired() == [run]
    assert _drive(run) == "succeeded"
    assert reads == ["a#1", "b#1", *ahead, "b#1", "c#1"]  # b again, as attempt 1 once more
    assert len(paid) == 2 and ToolCall.objects.filter(run_id=run, tool="pay").count() == 2
    b = ToolCall.objects.get(run_id=run, args={"q": "b"})
    assert list(b.attempt_rows.values_list("attempt", "status")) == [(1, "succeeded")]
    seqs = list(Event.objects.filter(run_id=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert replay_state(run) == load_state(run)


def test_a_worker_lost_after_a_read_fence_committed_runs_the_read_as_its_next_attempt(unheld,
        agent, monkeypatch):
    """Killed in the model call after read b ran, its fence sent (and committed): recovery
    finds b's attempt open, closes it ``worker_lost`` and runs b again as attempt 2."""
    from runs.engine.runtime import model_turn
    from tests.runs.test_read_rides import Crash

    real_call = model_turn._call

    def dies(session, step, *args):
        if session.state["turn"] == 4:
            raise Crash("killed during the model call after read b")
        return real_call(session, step, *args)

    run = run_start(agent=agent, goal="g").pk
    monkeypatch.setattr(model_turn, "_call", dies)
    with pytest.raises(Crash):
        run_tick(run, worker="w-sent")
    monkeypatch.setattr(model_turn, "_call", real_call)
    b = ToolCall.objects.get(run_id=run, args={"q": "b"})
    assert b.status == "running"  # its fence committed; its result never did
    Run.objects.filter(pk=run).update(
        lease_expires_at=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
    assert runs_recover_expired() == [run]
    assert _drive(run) == "succeeded"
    assert reads == ["a#1", "b#1", "b#2", "c#1"]
    assert len(paid) == 2
    assert list(b.attempt_rows.order_by("attempt").values_list(
        "attempt", "status", "error_class")) == [(1, "timed_out", "worker_lost"),
                                                 (2, "succeeded", "")]
    assert replay_state(run) == load_state(run)


def test_held_reads_go_out_with_their_reply_and_a_write_still_sees_them_committed(agent, sent):
    read_rides._last_ms.clear()
    assert _drive(run_start(agent=agent, goal="warm").pk) == "succeeded"  # ``look`` seen quick
    reads.clear()
    paid.clear()
    sent.clear()
    run = run_start(agent=agent, goal="g").pk
    assert _drive(run) == "succeeded"
    assert sent.count(True) == 0  # no read fence: each reply went out with its reads' results
    assert reads == ["a#1", "b#1", "c#1"]
    # The write's fence read every unit sent before it: the held reads' rows and results
    # were committed (seen from another connection) before its effect.
    assert paid == [{"my_attempt": "running", "looks": [("succeeded", True)]},
                    {"my_attempt": "running", "looks": [("succeeded", True)] * 3}]
    attempts = ToolAttempt.objects.filter(tool_call__run_id=run)
    assert sorted(attempts.values_list("attempt", "status")) == [(1, "succeeded")] * 5
    assert replay_state(run) == load_state(run)
