"""A real worker's sweeper ends a run that waits (holding no worker) past its deadline.

The run refunds (reversible), emails (irreversible) and parks on a signal inside a real
``agentops worker``; nobody sends the signal. Past the deadline the worker's sweeper, under
the agent's terminate policy, compensates the refund and terminates the run as the system.
"""
from __future__ import annotations

import pytest

import tests.deadline_agents  # noqa: F401  (registers the agents in this process too)
from approvals.models import Intervention
from ledger.models import ToolCall
from runs.models import Run
from runs.services import run_start
from tests.e2e.workers import Worker, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_worker_terminates_a_run_waiting_past_its_deadline(tmp_path):
    worker = Worker("deadline", tmp_path, AGENTOPS_AGENTS="tests.deadline_agents")
    worker.start()
    try:
        wait_until(lambda: "worker up" in worker.log_path.read_text(errors="replace"), 60,
                   "the worker to start")
        run = run_start(agent="deadline-e2e", goal="refund A-1, email, wait for pickup")
        waiting = wait_until(lambda: Run.objects.filter(pk=run.pk, status="waiting").first(),
                             30, "the run to park on the carrier's signal")
        assert waiting.lease_owner == "" and waiting.wait_kind == "signal"
        ended = wait_until(lambda: Run.objects.filter(pk=run.pk, status="cancelled").first(),
                           40, "the sweeper to terminate the run past its deadline")
    finally:
        worker.stop()
    assert ended.finished_at >= ended.deadline
    calls = {c.tool: c.status for c in ToolCall.objects.filter(run=run)}
    assert calls == {"refund": "compensated", "email": "succeeded", "await_carrier": "cancelled"}
    row = Intervention.objects.get(run=run, action="run.deadline_terminate")
    assert row.actor_name == "system" and row.data["compensated"]
    assert ended.exceptions[-1]["by"] == "system"
