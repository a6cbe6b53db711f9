"""Crash at every commit boundary (and inside every write tool), recover, finish.

For each boundary a fresh run of read, idempotent-write, probeable-write and unsafe-write
tools is killed right after that commit, its lease expires, the sweeper re-queues it and it
runs to the end. Nothing confirmed is lost and no unsafe side effect is repeated.
"""
import datetime as dt

import pytest

from ledger.models import ToolCall
from runs.engine.runtime import session as session_mod
from runs.engine.runtime.recovery import runs_recover_expired
from runs.engine.runtime.snapshots import load_state, replay_state
from agentops.control import RunControl
from runs.models import Event, Run
from runs.services import run_start
from runs.engine.runtime.waits import timers_wake
from tests.conftest import drive
from tests.runs.waits_helpers import later

pytestmark = pytest.mark.django_db
PLAN = ["quote", "pay", "ship", "notify"]


class Crash(RunControl):
    """The worker process dies here."""


@pytest.fixture
def crash_after(monkeypatch):
    """Make the N-th commit (1-based) the last thing the worker does; returns a counter."""
    state = {"n": 0, "at": None, "kinds": {}}
    real = session_mod.RunSession.commit

    def commit(self, events, **kwargs):
        real(self, events, **kwargs)
        state["n"] += 1
        state["kinds"][state["n"]] = [(e.type, e.data.get("id")) for e in events]
        if state["at"] is not None and state["n"] == state["at"]:
            raise Crash(f"killed after commit {state['n']}")

    monkeypatch.setattr(session_mod.RunSession, "commit", commit)
    return state


def _in_doubt(run: Run) -> bool:
    return (run.status == "waiting" and run.wait_kind == "timer"
            and "may still be in flight" in run.wait_data.get("reason", ""))


def _run_with_recovery(engine, agent: str, in_doubt: list | None = None) -> Run:
    """Drive the run, recovering it after each crash; let time pass over in-doubt waits."""
    run = run_start(agent=agent, goal="sell a book")
    skew = 0.0
    for _ in range(10):
        try:
            with later(skew):
                status = drive(run)
        except Crash:
            run.refresh_from_db()
            if run.status == "running":
                Run.objects.filter(pk=run.pk).update(
                    lease_expires_at=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
                assert runs_recover_expired() == [run.pk]
            continue
        if _in_doubt(run):
            # The probe found nothing while the lost attempt could still land: the run
            # waits out the attempt's hard deadline before it probes again.
            skew = (run.wait_until - dt.datetime.now(dt.timezone.utc)).total_seconds() + 1
            if in_doubt is not None:
                in_doubt.append(run.wait_until)
            with later(skew):
                assert timers_wake() == [run.pk]
            continue
        if status not in ("queued", "running"):
            break
    run.refresh_from_db()
    return run


def _marker_is(kinds, run, tool: str) -> bool:
    started = [i for t, i in kinds if t == "tool.started"]
    return ToolCall.objects.filter(run=run, tool_call_id__in=started, tool=tool).exists()


def _marker_is_email(kinds, run) -> bool:
    return _marker_is(kinds, run, "email")


def _check_invariants(engine, run: Run) -> None:
    state = load_state(run.pk)
    assert replay_state(run.pk) == state
    for e in Event.objects.filter(run=run, type="tool.result", data__status="succeeded"):
        assert state["facts"][e.data["id"]] == e.data["facts"], "a confirmed fact was lost"
    for call in ToolCall.objects.filter(run=run, status="succeeded"):
        assert Event.objects.filter(run=run, type="tool.result", tool_call_id=call.tool_call_id).exists()
    charges = {k for t, k, _ in engine.world.effects if t == "charge"}
    assert len(charges) <= 1 and engine.world.count("charge") == len(charges)
    assert engine.world.count("ship") <= 1
    assert engine.world.count("email") <= 1


def test_crash_after_every_commit(engine, crash_after):
    engine.make_agent("mixed", engine.MIXED_SCRIPT, plan=PLAN)
    clean = _run_with_recovery(engine, "mixed")
    assert clean.status == "succeeded"
    total, kinds = crash_after["n"], dict(crash_after["kinds"])
    assert total >= 10
    for at in range(1, total + 1):
        engine.world.effects.clear()
        crash_after.update(n=0, at=at, kinds={})
        in_doubt: list = []
        run = _run_with_recovery(engine, "mixed", in_doubt)
        # Killed after ship's attempt was fenced: its probe finds nothing, but the attempt
        # could still land, so the run waits out its hard deadline once before retrying.
        assert len(in_doubt) == (1 if _marker_is(kinds[at], clean, "ship") else 0), at
        ended_the_run = any(t == "run.completed" for t, _ in kinds[at])
        assert run.recoveries == (0 if ended_the_run else 1), at
        _check_invariants(engine, run)
        if _marker_is_email(kinds[at], clean):
            # Killed after the unsafe write was marked running, before it could report: only a
            # person can tell whether it went out. It is never sent again automatically.
            assert run.status == "unknown", at
            assert engine.world.count("email") == 0
            continue
        assert run.status == "succeeded", (at, run.status, run.attention_detail)
        assert [t for t, _, _ in engine.world.effects] == ["charge", "ship", "email"], at


@pytest.mark.parametrize("tool,expected", [("charge", "succeeded"), ("ship", "succeeded"),
                                           ("email", "unknown")])
def test_crash_inside_a_write_tool_after_its_effect(engine, monkeypatch, tool, expected):
    engine.make_agent("mixed", engine.MIXED_SCRIPT, plan=PLAN)
    real = engine.world.did
    fired = []

    def did(name, key, args):
        real(name, key, args)
        if name == tool and not fired:
            fired.append(1)
            raise Crash(f"killed inside {tool}")

    monkeypatch.setattr(engine.world, "did", did)
    run = _run_with_recovery(engine, "mixed")
    assert run.status == expected, run.attention_detail
    assert engine.world.count(tool) == 1
    _check_invariants(engine, run)
    if expected == "unknown":
        call = ToolCall.objects.get(run=run, tool="email")
        assert call.status == "unknown" and run.current_tool_call == call.tool_call_id
