"""A run past its deadline: blocked for a person, or terminated as the system (its policy).

Runs go through the engine and the sweeper; a waiting run holds no worker, so only the
sweeper can catch it. The terminate path compensates the standing reversible write (the
same compensation Roll back and terminate runs), leaves the irreversible one standing, writes
one audit row with the system as actor, and the ended run lists what stands.
"""
from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse

from agentops import clock
from approvals.models import Intervention
from ledger.models import ToolCall
from runs.models import Run
from runs.services import run_start
from runs.sweeper import sweep_once
from tests.clock_helpers import clock_reads
from tests.conftest import drive
from tests.console_factories import client_for, make_role_users
from tests.deadline_agents import register

pytestmark = pytest.mark.django_db


def _later(seconds: float):
    at = clock.now() + dt.timedelta(seconds=seconds)
    return clock_reads(lambda: at)


def _waiting(name: str, **kw) -> Run:
    register(name, seconds=60, **kw)
    run = run_start(agent=name, goal="refund A-1, tell the customer, wait for pickup")
    assert drive(run) == "waiting" and run.wait_kind == "signal"
    return run


def test_by_default_a_run_waiting_past_its_deadline_is_blocked_for_a_person(engine):
    run = _waiting("dl-block")
    assert sweep_once().deadlines == []  # not due yet
    with _later(61):
        report = sweep_once()
    assert report.deadlines == [run.pk]
    run.refresh_from_db()
    assert (run.status, run.attention_reason) == ("blocked", "budget_exhausted")
    assert "passed while it waited for a signal" in run.attention_detail
    assert run.recommended_action == "raise_budget"
    assert ToolCall.objects.get(run=run, tool="refund").status == "succeeded"  # nothing undone
    admin = make_role_users()["admin"]
    page = client_for(admin).get(reverse("console:run", args=[run.pk])).content.decode()
    assert "Budget used up" in page and "Raise budget" in page
    resp = client_for(admin).post(reverse("console:run_action", args=[run.pk, "raise_budget"]),
                                  {"reason": "the carrier is late today", "seconds": "600"})
    assert resp.status_code in (200, 302)
    run.refresh_from_db()
    assert run.status == "queued"
    # The parked call failed with the deadline (as a wait's own timeout fails it), so the
    # resumed step reads that instead of running the parked call again; here it goes on.
    wait_call = ToolCall.objects.get(run=run, tool="await_carrier")
    assert (wait_call.status, wait_call.error_class) == ("failed", "deadline")
    assert drive(run) == "succeeded"


def test_under_the_terminate_policy_the_sweeper_compensates_and_ends_the_waiting_run(engine):
    run = _waiting("dl-term", on_deadline="terminate")
    with _later(61):
        sweep_once()
    run.refresh_from_db()
    assert run.status == "cancelled"
    calls = {c.tool: c.status for c in ToolCall.objects.filter(run=run)}
    assert calls["refund"] == "compensated" and calls["email"] == "succeeded"
    row = Intervention.objects.get(run=run, action="run.deadline_terminate")
    assert row.actor is None and row.actor_name == "system"
    assert "deadline" in row.reason and len(row.data["compensated"]) == 1
    lines = {ln["tool"]: ln for ln in row.data["calls"]}
    assert lines["refund"]["undone"] and lines["email"]["stands"]
    users = make_role_users()
    body = client_for(users["viewer"]).get(f"/api/runs/{run.pk}").json()
    stands = body["what_stands"]
    assert stands["ended_by"] == "system"
    assert [e["tool"] for e in stands["standing"]] == ["email"]
    assert [e["tool"] for e in stands["compensated"]] == ["refund"]
    assert [s["key"] for s in stands["not_done"]] == ["pickup"]
    page = client_for(users["operator"]).get(
        reverse("console:run", args=[run.pk])).content.decode()
    assert "by <strong>system</strong>" in page and "deadline" in page


def test_a_run_the_engine_holds_is_stopped_at_its_next_call_then_terminated(engine, settings):
    settings.AGENTOPS_DEADLINE_POLICY = "terminate"  # the setting, as no agent or policy says
    register("dl-engine", seconds=60)
    run = run_start(agent="dl-engine", goal="refund A-1")
    assert run.on_deadline == ""
    with _later(61):
        assert drive(run) == "blocked"
        assert "its deadline policy terminates it" in run.attention_detail
        sweep_once()
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert not ToolCall.objects.filter(run=run).exists()  # stopped before the first call
    assert Intervention.objects.filter(run=run, action="run.deadline_terminate").exists()


def test_an_agent_says_block_while_the_setting_says_terminate(engine, settings):
    settings.AGENTOPS_DEADLINE_POLICY = "terminate"
    run = _waiting("dl-agent-block", on_deadline="block")
    with _later(61):
        sweep_once()
        sweep_once()  # blocked once; a blocked run under "block" is left to its person
    run.refresh_from_db()
    assert (run.status, run.attention_reason) == ("blocked", "budget_exhausted")
    assert not Intervention.objects.filter(run=run).exists()
