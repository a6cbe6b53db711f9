"""Stragglers (issue 39 item 4): a run that stops with a call in flight and no live holder
closes each open call and attempt to what is known; no attempt stays ``running`` without a
live lease, and ``/metrics`` counts any that do."""
from __future__ import annotations

import re

import pytest

from agentops.control import RunControl
from ledger.models import ToolAttempt, ToolCall
from runs.engine.runtime.selfcheck import attempts_running_unleased
from runs.models import Run
from runs.services import run_cancel, run_start
from runs.sweeper import sweep_once
from tests.conftest import drive
from tests.runs.waits_helpers import later

pytestmark = pytest.mark.django_db


class Crash(RunControl):
    """The worker process dies here, inside the tool, after its effect."""


def _dies_inside(engine, monkeypatch, tool: str) -> Run:
    """Start a run whose worker dies inside ``tool`` (after the effect), leaving it running."""
    engine.make_agent(f"strag_{tool}", {"s": [engine.call(tool, **_ARGS[tool]), engine.say("ok")]},
                      plan=["s"])
    real = engine.world.did

    def did(name, key, args):
        real(name, key, args)
        if name == tool:
            raise Crash(f"killed inside {tool}")

    monkeypatch.setattr(engine.world, "did", did)
    run = run_start(agent=f"strag_{tool}", goal="g")
    with pytest.raises(Crash):
        drive(run)
    monkeypatch.setattr(engine.world, "did", real)
    call = ToolCall.objects.get(run=run, tool=tool)
    assert call.status == "running"
    assert ToolAttempt.objects.filter(tool_call=call, status="running").count() == 1
    return run


_ARGS = {"ship": {"order": "o-1"}, "email": {"to": "a@example.com"}}


def _running_attempts(run: Run) -> int:
    return ToolAttempt.objects.filter(tool_call__run=run, status="running").count()


def _metric(client, status: str) -> float:
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    found = re.search(r'^agentops_attempts_running_without_lease\{run_status="%s"\} (\S+)$'
                      % status, text, re.M)
    assert found, "the gauge is exported"
    return float(found.group(1))


@pytest.mark.parametrize("tool", ["ship", "email"])
def test_straggler_write_is_closed_when_the_recovery_limit_blocks_the_run(
        engine, monkeypatch, client, tool):
    run = _dies_inside(engine, monkeypatch, tool)
    Run.objects.filter(pk=run.pk).update(recovery_limit=0)
    with later(3600):
        assert _metric(client, "running") == 1  # its lease expired: nobody holds the attempt
        sweep_once()
        assert _metric(client, "running") == 0 and _metric(client, "blocked") == 0
    run.refresh_from_db()
    assert run.status == "blocked" and run.attention_reason == "recovery_limit"
    call = ToolCall.objects.get(run=run, tool=tool)
    assert call.status == "unknown" and call.error_class == "worker_lost"
    assert "may have happened" in call.error
    assert _running_attempts(run) == 0
    attempt = ToolAttempt.objects.get(tool_call=call)
    assert attempt.status == "unknown" and attempt.finished_at is not None
    assert attempts_running_unleased() == {}
    assert engine.world.count(tool) == 1


def test_straggler_left_by_a_run_its_restored_session_blocked_is_closed_by_the_sweeper(
        engine, monkeypatch):
    run = _dies_inside(engine, monkeypatch, "email")
    with later(3600):
        sweep_once()  # recovered: queued again
    run.refresh_from_db()
    assert run.status == "queued"
    # The restored session's self-check fails before it reconciles the dead worker's call.
    Run.objects.filter(pk=run.pk).update(goal="another goal")
    assert drive(run) == "blocked"
    run.refresh_from_db()
    assert run.attention_reason == "self_check_failed"
    report = sweep_once()
    assert report.stragglers == [run.pk]
    call = ToolCall.objects.get(run=run, tool="email")
    assert call.status == "unknown" and _running_attempts(run) == 0
    assert attempts_running_unleased() == {}


def test_straggler_read_is_abandoned_and_a_keyed_write_left_pending_on_a_blocked_run(engine):
    """Reads and keyed writes are not marked running today; a row left running (an older
    worker, or one that marked them) is closed by what is safe: run again on a retry."""
    engine.make_agent("strag_mixed", {"s": [engine.call("lookup", item="x"),
                                            engine.call("charge", amount=1), engine.say("ok")]},
                      plan=["s"])
    run = run_start(agent="strag_mixed", goal="g")
    assert drive(run) == "succeeded"
    for call in ToolCall.objects.filter(run=run):
        ToolCall.objects.filter(pk=call.pk).update(status="running")
        ToolAttempt.objects.update_or_create(tool_call=call, attempt=call.attempts or 1,
                                             defaults={"status": "running",
                                                       "started_at": call.created_at})
    Run.objects.filter(pk=run.pk).update(status="blocked")
    sweep_once()
    calls = {c.tool: c for c in ToolCall.objects.filter(run=run)}
    assert calls["lookup"].status == "pending" and calls["lookup"].error_class == "abandoned"
    assert calls["charge"].status == "pending"
    assert ToolAttempt.objects.get(tool_call=calls["lookup"]).status == "timed_out"
    assert _running_attempts(run) == 0


def test_straggler_cancelled_run_abandons_its_read_and_leaves_its_write_unknown(
        engine, monkeypatch):
    run = _dies_inside(engine, monkeypatch, "ship")
    run_cancel(run=run, actor="op", reason="stop")
    call = ToolCall.objects.get(run=run, tool="ship")
    assert call.status == "unknown" and call.error_class == "cancelled_in_flight"
    assert _running_attempts(run) == 0 and attempts_running_unleased() == {}


def test_straggler_attempt_fails_the_restored_runs_self_check(engine, monkeypatch):
    run = _dies_inside(engine, monkeypatch, "email")
    ToolCall.objects.filter(run=run).update(status="unknown")  # its attempt left running
    with later(3600):
        sweep_once()
    assert drive(run) == "blocked"
    run.refresh_from_db()
    assert run.attention_reason == "self_check_failed"
    assert "attempt #1 of" in run.attention_detail and "nobody will close it" in run.attention_detail
