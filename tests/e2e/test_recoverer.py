"""Recovery on real worker hosts: a killed host's runs are taken at once, and recovered runs
reach free run slots without waiting for their own q2 ticks.

Real ``agentops worker`` hosts (one q2 process each, run slots on PostgreSQL) run
``bench-remote`` runs against a real model server (bench.model_server).
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench.model_server import model_env, model_server_start
from runs.engine.runtime.queue import enqueue_tick
from runs.models import Event, Run, WorkerHeartbeat
from runs.services import run_start
from tests.e2e.workers import Worker, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _host(tmp_path: Path, name: str, url: str) -> Worker:
    return Worker(name, tmp_path, env={
        "AGENTOPS_AGENTS": "bench.agents", **model_env(url), "AGENTOPS_WORKERS": "1",
        "AGENTOPS_LEASE_TTL_S": "30", "AGENTOPS_SWEEP_INTERVAL_S": "30",
        "AGENTOPS_TICK_SLICE_S": "20"})


def test_recovered_runs_start_on_free_slots_with_one_tick_and_a_killed_host_s_at_once(
        settings, tmp_path):
    """Six recovered runs queued with no tick of their own: one tick brings them all to the
    host's free slots. Then that host is SIGKILLed: with a 30 s TTL and a 30 s sweep, only
    its vanished sessions can tell the other host's recoverer, which takes its runs within
    seconds."""
    import bench.agents  # noqa: F401  (registers bench-remote in this process too)

    server, url = model_server_start(0.3, 1000)
    a, b = _host(tmp_path, "r0", url), _host(tmp_path, "r1", url)
    try:
        a.start()
        wait_until(lambda: WorkerHeartbeat.objects.exists(), 30, "the host to be up")
        settings.AGENTOPS_ENQUEUE_TICKS = False  # their ticks are never enqueued ...
        ids = [run_start(agent="bench-remote", goal=f"urgent {i}", input={}).pk for i in range(6)]
        Run.objects.filter(pk__in=ids).update(urgent=True)  # ... as if just recovered
        settings.AGENTOPS_ENQUEUE_TICKS = True
        enqueue_tick(ids[0])  # one tick for them all (a sweep re-enqueues the rest after 10 s)
        wait_until(lambda: Run.objects.filter(pk__in=ids, status="running").count() == 6, 6,
                   "one tick to start all six recovered runs")
        b.start()
        wait_until(lambda: WorkerHeartbeat.objects.count() == 2, 30, "host b to be up")
        time.sleep(0.5)  # b's recoverer has looked (full check) and seen a's sessions
        a.kill()
        killed = time.monotonic()
        wait_until(lambda: Event.objects.filter(run_id__in=ids, type="run.recovered",
                                                data__cause="owner_gone").count() == 6,
                   10, "the killed host's runs to be recovered")
        took = time.monotonic() - killed
    finally:
        for host in (a, b):
            host.stop()
        server.kill()
        server.wait(5)
    print(f"recoverer: 6 runs of a killed host recovered {took:.2f}s after SIGKILL")
    assert took < 5, f"a killed host's runs were recovered {took:.1f}s after it died"
