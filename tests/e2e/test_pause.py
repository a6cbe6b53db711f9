"""A paused worker never repeats a write: SIGSTOP the lease holder mid-call, SIGCONT later.

Two real worker hosts. For each effect class a run makes one call; once its attempt has
started, the holder's whole process group is stopped (a GC pause, a frozen VM), its lease
expires, the other host takes the run over; the paused host is resumed while the new
holder is still busy with the call, so the paused attempt lands late. Per logical call the
world sees at most one effect, and the write with neither key nor probe ends ``unknown``.
"""
from __future__ import annotations

import time

import pytest

from ledger.models import ToolAttempt, ToolCall
from runs.engine.runtime.selfcheck import attempts_running_unleased
from runs.models import Event, Run
from runs.statuses import ATTENTION, TERMINAL
from tests.e2e.workers import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TOOL_TIMEOUT_S = 4  # hard deadline of an attempt: start + 4 s + the 3 s lease TTL
RESUME_AFTER_S = 5.0  # after the attempt started: the paused attempt lands before its deadline
CASES = [  # agent, tool, expected status
    ("chaos_read", "inspect", "succeeded"),
    ("chaos_idem", "charge", "succeeded"),
    ("chaos_probe", "ship", "succeeded"),
    ("chaos_unsafe", "email", "unknown"),
]


@pytest.fixture
def hosts(settings, tmp_path):
    """The world table and two worker hosts (one process each), stopped at the end."""
    from tests import chaos_agents
    from tests.e2e.workers import Worker

    settings.AGENTOPS_ENQUEUE_TICKS = True
    settings.AGENTOPS_LEASE_TTL_S = 3.0
    settings.AGENTOPS_SWEEP_INTERVAL_S = 0.5
    chaos_agents.world_create()
    env = {"AGENTOPS_WORKERS": "1", "AGENTOPS_TOOL_TIMEOUT_S": str(TOOL_TIMEOUT_S)}
    pair = [Worker(f"p{i}", tmp_path, env=env) for i in range(2)]
    for w in pair:
        w.start()
    yield pair
    for w in pair:
        w.resume()
        w.stop()
    chaos_agents.world_drop()




def _started(run_id, tool: str):
    """Return (owner, monotonic time) once the call's attempt has started (the run for reads)."""
    if tool == "inspect":
        def ready():
            row = Run.objects.filter(pk=run_id, status="running").values("lease_owner").first()
            seen = Event.objects.filter(run_id=run_id, type="step.started").exists()
            return row and seen and row["lease_owner"]
    else:
        def ready():
            if not ToolAttempt.objects.filter(tool_call__run_id=run_id, tool_call__tool=tool,
                                              status="running").exists():
                return None
            return Run.objects.filter(pk=run_id).values_list("lease_owner", flat=True).first()
    owner = wait_until(ready, 30, f"{tool} to start")
    return owner, time.monotonic()


def _host_of(owner: str, hosts):
    pid = int(owner.rsplit(":", 1)[1])
    return next(w for w in hosts if pid in w.pids())


def _pause_scenario(hosts, agent: str, tool: str, n: int):
    from runs.services import run_start

    run = run_start(agent=agent, goal=f"pause {n}", input={"order": f"p{n}"})
    owner, t0 = _started(run.pk, tool)
    paused_at = time.time()
    victim = _host_of(owner, hosts)
    victim.pause()
    try:
        # The other host takes the run over once the lease has expired.
        wait_until(lambda: Run.objects.filter(pk=run.pk).exclude(lease_owner=owner)
              .exclude(lease_owner="").exists()
              or Run.objects.filter(pk=run.pk, status__in=["waiting", "unknown"]).exists(),
              20, "the run to be taken over")
        time.sleep(max(0.0, t0 + RESUME_AFTER_S - time.monotonic()))
    finally:
        victim.resume()
    wait_until(lambda: Run.objects.filter(pk=run.pk, status__in=list(TERMINAL | ATTENTION))
          .exclude(status="waiting").first(), 30, f"{agent} to settle")
    run.refresh_from_db()
    return run, paused_at


def test_a_paused_lease_holder_never_repeats_an_effect(hosts):
    from django.db import connection

    from tests import chaos_agents

    for n, (agent, tool, expected) in enumerate(CASES):
        run, paused_at = _pause_scenario(hosts, agent, tool, n)
        calls = list(ToolCall.objects.filter(run=run))
        assert run.status == expected, (agent, run.status, run.attention_detail)
        # Issue 39 item 4: nothing left running with nobody holding it (the /metrics gauge).
        assert attempts_running_unleased() == {}, agent
        keys = {c.idempotency_key for c in calls}
        effects = [k for t, k, _ in chaos_agents.world_rows() if k in keys]
        assert len(effects) == len(set(effects)), f"{agent}: an effect happened twice"
        for c in calls:
            results = Event.objects.filter(run=run, type="tool.result", tool_call_id=c.tool_call_id)
            assert results.count() <= 1, f"{agent}: {c.tool_call_id} has two results"
        if tool == "email":
            call = calls[0]
            assert call.status == "unknown"
            assert not ToolAttempt.objects.filter(tool_call=call, finished_at__isnull=True).exists()
        if tool == "ship":
            assert effects, "the paused attempt's shipment is the one effect"
            with connection.cursor() as cur:
                cur.execute(f"SELECT extract(epoch FROM at) FROM {chaos_agents.TABLE} "
                            "WHERE tool = 'ship' AND key = %s", [calls[0].idempotency_key])
                landed = cur.fetchone()[0]
            if float(landed) > paused_at + 1:  # it landed late: the new holder had to wait
                waited = Event.objects.filter(run=run, type="wait.started",
                                              data__data__reason__icontains="may still be in flight")
                assert waited.exists(), "the probe's 'not found' was trusted before the deadline"
