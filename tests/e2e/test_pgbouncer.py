"""Worker hosts through PgBouncer in transaction mode (the PgBouncer pass, make test-pgbouncer).

Every pooled connection of the real worker hosts (and of this test) goes through a pgbouncer
of the pass's own with 10 server connections (tests/pgbouncer_pass.py); each q2 process also
holds its owner session directly on PostgreSQL (runs.pooler). ``bench-remote`` runs call a
real model server that sleeps on every call, so runs stay in flight across many transactions.
"""
from __future__ import annotations

import os
import signal
import time

import psycopg
import pytest
from django.conf import settings as django_settings

from bench.model_server import model_env, model_server_start
from runs.models import Event, Run
from runs.services import run_start
from tests.e2e.workers import Worker, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.pgbouncer,
              pytest.mark.django_db(transaction=True)]
# A long TTL: runs recovered within a few seconds of a kill were released on death (the owner
# session closed with its process), not by their leases running out.
TTL_S, SWEEP_S, RUNS, IN_FLIGHT = 20.0, 0.5, 12, 6


def _owners_in(host: Worker, ids: list) -> dict:
    """Return {run id: owner} of the runs a q2 process of ``host`` holds now."""
    pids = host.pids()
    return {pk: owner for pk, owner in Run.objects.filter(pk__in=ids, status="running")
            .values_list("pk", "lease_owner") if int(owner.rsplit(":", 1)[1]) in pids}


def _sessions_named(owner: str) -> list[str]:
    """Return the backend types of the direct sessions named ``owner`` (pg_stat_activity)."""
    with psycopg.connect(django_settings.AGENTOPS_DB_DIRECT_URL, autocommit=True) as conn:
        return [r[0] for r in conn.execute(
            "SELECT backend_type FROM pg_stat_activity WHERE application_name = %s", [owner])]


def test_a_killed_worker_s_runs_are_released_at_once_and_a_live_one_s_never(settings, tmp_path,
                                                                          _through_pgbouncer):
    """Two hosts through the pooler: SIGKILL one; its runs are recovered (owner gone) long
    before their leases would expire, the other host's runs never are, and every run ends."""
    import bench.agents  # noqa: F401  (registers bench-remote in this process too)

    assert settings.AGENTOPS_DB_POOLER == "transaction"
    settings.AGENTOPS_ENQUEUE_TICKS = True
    server, url = model_server_start(0.4, 25)
    hosts = [Worker(f"p{i}", tmp_path, env={
        "AGENTOPS_AGENTS": "bench.agents", **model_env(url), "AGENTOPS_WORKERS": "1",
        "AGENTOPS_RUNS_IN_FLIGHT": str(IN_FLIGHT), "AGENTOPS_LEASE_TTL_S": str(TTL_S),
        "AGENTOPS_SWEEP_INTERVAL_S": str(SWEEP_S), "AGENTOPS_TICK_SLICE_S": "30"})
        for i in range(2)]
    try:
        for host in hosts:
            host.start()
        ids = [run_start(agent="bench-remote", goal=f"pooled {i}", input={}).pk
               for i in range(RUNS)]
        wait_until(lambda: all(_owners_in(h, ids) for h in hosts), 60, "both hosts to hold runs")
        a, b = hosts
        held_a, held_b = _owners_in(a, ids), _owners_in(b, ids)
        owner = next(iter(held_a.values()))
        assert _sessions_named(owner) == ["client backend"], "no owner session of its own"
        os.killpg(a.proc.pid, signal.SIGKILL)
        killed = time.monotonic()
        wait_until(lambda: Event.objects.filter(
            run_id__in=held_a, type="run.recovered", data__cause="owner_gone").count()
            == len(held_a), TTL_S / 2, f"the {len(held_a)} runs of the killed host to be released")
        took = time.monotonic() - killed
        wait_until(lambda: Run.objects.filter(pk__in=ids, status="succeeded").count() == RUNS,
                   90, f"all {RUNS} runs to succeed on the host left")
    finally:
        for host in hosts:
            host.stop()
        server.kill()
        server.wait(5)
    print(f"pgbouncer: {len(held_a)} runs of a killed host released {took:.1f}s after the kill")
    assert not Event.objects.filter(run_id__in=held_b, type="run.recovered").exists(), \
        "a live host's run was judged to have lost its worker"
    assert not _sessions_named(owner), "the killed worker's owner session outlived it"
