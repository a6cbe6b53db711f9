"""The one-statement claim on PostgreSQL (runs.engine.runtime.claim_sql): the lease, its event
and what the tick loads next (state, tool limits) in one round trip, the same as read apart."""
from __future__ import annotations

import datetime as dt

import pytest

from agentops import clock
from ledger.models import ToolLimit
from ledger.services.limits import limits_load
from runs.engine.runtime.claim_sql import claimed_limits, claimed_state
from runs.engine.runtime.snapshots import load_state, snapshot_build
from runs.engine.runtime.transition import run_claim

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _snapshot_and_limit(run) -> None:
    """A snapshot of the queued run and an open breaker of its team."""
    snapshot_build(run_id=run.pk, state=load_state(run), phase="rest",
                   agent_version=run.agent_version).save()
    ToolLimit.objects.create(team_id=run.team_id, tool="flaky", breaker_failures=5,
                             breaker_opened_at=clock.now() - dt.timedelta(seconds=3))


def test_a_claim_and_what_the_tick_loads_cost_one_round_trip(run):
    from django.db import connection

    from bench._common import RoundTrips

    _snapshot_and_limit(run)
    connection.ensure_connection()
    trips = RoundTrips().start()
    try:
        claimed = run_claim(run_id=run.pk, owner="w1", ttl_s=30)
        state, limits = claimed_state(claimed), claimed_limits(claimed)
        n, _ = trips.take()
    finally:
        trips.stop()
    assert n == 1  # it was 9: the claim's 6, the snapshot, the events after it, the limits
    assert state["seq"] == claimed.last_seq and state["status"] == "running"
    assert list(limits) == ["flaky"]


def test_the_claims_reads_equal_the_general_reads(run):
    _snapshot_and_limit(run)
    claimed = run_claim(run_id=run.pk, owner="w1", ttl_s=30)
    assert claimed_state(claimed) == load_state(claimed)
    got, read = claimed_limits(claimed)["flaky"], limits_load(team_id=run.team_id)["flaky"]
    fields = [f.attname for f in ToolLimit._meta.concrete_fields]
    assert [getattr(got, f) for f in fields] == [getattr(read, f) for f in fields]
    assert got.breaker_opened_at == read.breaker_opened_at and got.pk == read.pk


def test_what_the_claim_read_serves_once(run):
    """A second open of the same Run object (a retry after a failure) reads again."""
    claimed = run_claim(run_id=run.pk, owner="w1", ttl_s=30)
    claimed_state(claimed), claimed_limits(claimed)
    ToolLimit.objects.create(team_id=run.team_id, tool="later")
    assert "later" in claimed_limits(claimed)
    assert claimed_state(claimed) == load_state(claimed)


def test_a_runs_unknown_calls_are_still_found_at_its_end(run):
    """The prepared read at a run's end finds every call left unknown or running, in order."""
    from ledger.models import ToolCall
    from runs.engine.runtime.exceptions import unknown_calls

    for i, status in enumerate(["unknown", "succeeded", "running"]):
        ToolCall.objects.create(tool_call_id=f"tc_{i}", run=run, step_key="s", turn=1,
                                index=i, tool="pay", args_hash="h", idempotency_key=f"k{i}",
                                status=status, error="timed out" if i == 0 else "")
    found = unknown_calls(run.pk)
    assert [(c["tool_call_id"], c["why"]) for c in found] == [
        ("tc_0", "timed out"), ("tc_2", "its outcome was never confirmed")]
    assert found[0]["when"] == ToolCall.objects.get(tool_call_id="tc_0").updated_at.isoformat()


def test_a_ticks_own_round_trips_outside_its_units_are_its_claim(engine, monkeypatch):
    """A tick of a no-op run: claim, load, secrets and limits outside its units are one
    round trip (it was 9: the claim's 6, the snapshot, the events after it, the limits)."""
    from bench._common import RoundTrips
    from runs.engine.runtime import loop
    from runs.services import run_start

    engine.make_agent("once", {"s": [engine.say("ok")]}, plan=["s"])
    run_id = run_start(agent="once", goal="g").pk
    trips, outside, real = RoundTrips(), [], loop.unit

    def unit(session):
        outside.append(trips.take()[0])
        real(session)
        trips.take()

    monkeypatch.setattr(loop, "unit", unit)
    trips.start()
    try:
        assert loop.run_tick(run_id, worker="w:1") == "succeeded"
        outside.append(trips.take()[0])
    finally:
        trips.stop()
    assert sum(outside) == 1
