"""How q2 hands ticks to run slots: fast, never to a full process, and none lost for long.

Real ``agentops worker`` hosts (q2 cluster, ORM broker on PostgreSQL) and a real model
server that sleeps on every call (bench.model_server), as in test_density.
"""
from __future__ import annotations

import time

import pytest
from django.utils import timezone
from django_q.models import OrmQ, Task
from django_q.signing import SignedPackage

from bench.model_server import model_env, model_server_start
from runs.engine.runtime.recovery import STALE_QUEUED_S
from runs.models import Run
from runs.services import run_start
from tests.e2e.test_density import _remote_worker, _until_done, _warm_up
from tests.e2e.workers import Worker

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _running(ids: list) -> int:
    return Run.objects.filter(pk__in=ids, status="running").count()


def _ticks() -> tuple[set[str], set[str]]:
    """Return the runs with ticks taken off the queue (not acknowledged), and those with
    ticks still on it, visible to every host."""
    now = timezone.now()
    taken, visible = set(), set()
    for payload, lock in OrmQ.objects.values_list("payload", "lock"):
        run_id = SignedPackage.loads(payload)["args"][0]
        (taken if lock is not None and lock > now else visible).add(run_id)
    return taken, visible


def _hidden() -> int:
    """Return how many queued runs only a taken tick can start: hidden from other hosts.

    A run whose slice ended while its old tick's acknowledgement is still on its way has a
    fresh tick on the queue: another host can take it, so it is not hidden.
    """
    taken, visible = _ticks()
    return Run.objects.filter(pk__in=taken - visible, status="queued").count()


def test_as_many_runs_as_slots_are_all_in_flight_at_once(settings, tmp_path):
    """2 q2 processes x 20 slots, 40 runs: all 40 are in flight together within seconds.

    A process whose slots are all busy takes no further tick (its task returns only once a
    slot is free), so the last ticks go to the process that still has slots: none waits
    in a full process for a slice to end.
    """
    settings.AGENTOPS_ENQUEUE_TICKS = True
    runs, peak = 40, {"running": 0, "at": None}
    with _remote_worker("even", tmp_path, delay_s=2.0, calls=4, env={
            "AGENTOPS_WORKERS": "2", "AGENTOPS_RUNS_IN_FLIGHT": str(runs // 2)}):
        t0 = time.monotonic()
        ids = [run_start(agent="bench-remote", goal=f"even {i}", input={}).pk
               for i in range(runs)]

        def sample() -> None:
            now = _running(ids)
            if now > peak["running"]:
                peak.update(running=now, at=time.monotonic() - t0)

        _until_done(ids, within_s=50, each=sample, pause_s=0.05)
    assert set(Run.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"succeeded"}
    assert peak["running"] == runs, f"at most {peak['running']} of {runs} runs in flight"
    assert peak["at"] < 15, f"{runs} runs in flight only after {peak['at']:.1f}s"
    # Ticks are not recorded as q2 results (one write fewer per tick for q2's monitor).
    assert not Task.objects.filter(func="runs.tasks.tick", success=True).exists()


def test_a_full_process_hides_at_most_two_ticks(settings, tmp_path):
    """1 process x 4 slots, 12 runs with long model calls: while 4 run, at most 2 more
    ticks are taken off the queue (q2's one-task local queue and the pusher's hand); the
    rest stay on the queue, visible to every other host."""
    settings.AGENTOPS_ENQUEUE_TICKS = True
    worst = {"hidden": 0, "full": 0}
    with _remote_worker("full", tmp_path, delay_s=3.0, calls=1, env={
            "AGENTOPS_RUNS_IN_FLIGHT": "4"}):
        ids = [run_start(agent="bench-remote", goal=f"full {i}", input={}).pk
               for i in range(12)]

        def sample() -> None:
            if _running(ids) == 4:
                worst["full"] += 1
                worst["hidden"] = max(worst["hidden"], _hidden())

        _until_done(ids, within_s=50, each=sample, pause_s=0.05)
    assert set(Run.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"succeeded"}
    assert worst["full"] > 10, "the process was never seen with every slot busy"
    assert worst["hidden"] <= 2, f"{worst['hidden']} ticks hidden in a full process"


def test_ticks_prefetched_by_a_killed_host_are_taken_again_within_the_stale_bound(
        settings, tmp_path):
    """A host with every slot busy and ticks in its hands is SIGKILLed: a second host
    finishes every run, and a run whose tick the dead host held waits at most the stale
    bound (STALE_QUEUED_S, then one sweep) plus the lease TTL, never q2's `retry`."""
    import bench.agents  # noqa: F401  (registers bench-remote in this process too)

    settings.AGENTOPS_ENQUEUE_TICKS = True
    proc, url = model_server_start(2.0, 1)
    env = {"AGENTOPS_AGENTS": "bench.agents", **model_env(url), "AGENTOPS_WORKERS": "1",
           "AGENTOPS_RUNS_IN_FLIGHT": "3"}
    first, second = Worker("doomed", tmp_path, env=env), Worker("heir", tmp_path, env=env)
    try:
        first.start()
        _warm_up()
        ids = [run_start(agent="bench-remote", goal=f"doomed {i}", input={}).pk
               for i in range(8)]
        deadline = time.monotonic() + 30
        while not (_running(ids) == 3 and _hidden() >= 1):
            assert time.monotonic() < deadline, "the host never filled its slots"
            time.sleep(0.05)
        hidden = _hidden()
        first.kill()
        killed = time.monotonic()
        second.start()
        _until_done(ids, within_s=45, each=lambda: None)
        took = time.monotonic() - killed
    finally:
        first.stop()
        second.stop()
        proc.kill()
        proc.wait(5)
    assert hidden >= 1, "the killed host held no prefetched tick"
    assert set(Run.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"succeeded"}
    bound = STALE_QUEUED_S + 2 * settings.AGENTOPS_SWEEP_INTERVAL_S \
        + settings.AGENTOPS_LEASE_TTL_S + 15  # the heir's start-up and the runs' own 4 s
    assert took < bound, f"the runs of the killed host took {took:.1f}s to finish"
    assert took < settings.Q_CLUSTER["retry"]
