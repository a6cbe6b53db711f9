"""Recovery on real worker hosts: a killed host's runs are taken at once, and recovered runs
reach free run slots without waiting for their own q2 ticks.

Real ``agentops worker`` hosts (one q2 process each, run slots on PostgreSQL) run
``bench-remote`` runs against a real model server (bench.model_server).
"""
from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pytest

from agentops import clock
from bench.model_server import model_env, model_server_start
from runs.engine.runtime.queue import enqueue_tick
from runs.models import Event, Run, WorkerHeartbeat
from runs.services import run_start
from tests.e2e.workers import Worker, wait_until
from tests.factories import make_run
from tests.pg_sessions import pg_session

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


def test_a_lease_expiring_while_a_round_recovers_is_taken_next_not_a_check_later(tmp_path):
    """A paused host's leases expire a few milliseconds apart. The recoverer of a real host
    wakes at the first, finds that run's row locked by the paused owner's open transaction
    and ends that session (pg_terminate_backend waits for it: a tenth of a second at least),
    while the second lease expires. That run was not tried yet: it is recovered in the next
    round at once, not ``AGENTOPS_RECOVERY_CHECK_S`` (1 s here) later as a run found locked."""
    import bench.agents  # noqa: F401  (registers bench-slow in this process too)

    host = Worker("x0", tmp_path, env={
        "AGENTOPS_AGENTS": "bench.agents", "AGENTOPS_WORKERS": "1",
        "AGENTOPS_LEASE_TTL_S": "1.5", "AGENTOPS_SWEEP_INTERVAL_S": "1",
        "AGENTOPS_RECOVERY_CHECK_S": "1"})
    owner = "paused-host:4200001"
    sessions = [pg_session(owner) for _ in range(2)]  # a paused worker keeps its sessions
    try:
        host.start()
        wait_until(lambda: WorkerHeartbeat.objects.exists(), 30, "the host to be up")
        locked, later = make_run(agent="bench-slow"), make_run(agent="bench-slow")
        first = clock.now() + dt.timedelta(seconds=1.3)  # the recoverer has read it by then
        for run, expires in ((locked, first), (later, first + dt.timedelta(seconds=0.06))):
            Run.objects.filter(pk=run.pk).update(status="running", lease_owner=owner,
                                                 lease_expires_at=expires)
        sessions[0].execute("SELECT 1 FROM runs_run WHERE id = %s FOR UPDATE", [locked.pk])
        recovered = wait_until(lambda: Event.objects.filter(
            run_id=later.pk, type="run.recovered").first(), 10, "the second lease's run")
        assert Event.objects.filter(run_id=locked.pk, type="run.recovered").exists()
    finally:
        host.stop()
        for session in sessions:
            session.close()
    late = (recovered.at - (first + dt.timedelta(seconds=0.06))).total_seconds()
    print(f"recoverer: a lease expired during a round recovered {late:.2f}s after its expiry")
    assert recovered.data["cause"] == "lease_expired"
    assert late < 0.5, f"recovered {late:.2f}s after its lease expired: a check later"
