"""Many runs in flight in one worker process: a waiting model call holds a thread, not a process.

A real ``agentops worker`` host with ONE q2 process, a real model server (bench.model_server)
that sleeps on every call, reached through the real ``openai`` client. 40 runs of 4 model
calls each (one tool step) at 0.5 s a call: one run at a time would take 40 x 4 x 0.5 = 80 s;
with the runs in flight together it takes a few seconds. The worker's PostgreSQL sessions
stay within its connection pool meanwhile.
"""
from __future__ import annotations

import time

import pytest
from django.db import connection

from bench.model_server import model_server_start
from runs.models import Event, Run
from tests.e2e.workers import Worker

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RUNS, DELAY_S, CALLS = 40, 0.5, 3  # plan is given: calls = steps + the final answer
POOL_MAX = 6


@pytest.fixture
def model_url():
    """Start bench.model_server in its own process; yield its base URL."""
    proc, url = model_server_start(DELAY_S, CALLS - 1)
    yield url
    proc.kill()
    proc.wait(5)


def _warm_up(run_start) -> None:
    """Have the worker finish one run first: its first tick imports the agents and the model
    SDK, which on a loaded machine can outlast a 3 s lease (the run is then recovered)."""
    pk = run_start(agent="bench-remote", goal="warm up", input={}).pk
    deadline = time.monotonic() + 60
    while Run.objects.filter(pk=pk).exclude(status="succeeded").exists():
        assert time.monotonic() < deadline, "the warm-up run did not finish"
        time.sleep(0.1)


def _worker_sessions(pids: set[int]) -> int:
    names = [f"%:{pid}" for pid in pids]
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE ANY(%s)",
                    [names])
        return cur.fetchone()[0]


def test_one_process_keeps_forty_slow_runs_in_flight(settings, tmp_path, model_url):
    import bench.agents  # noqa: F401  (registers bench-remote here too)
    from runs.services import run_start

    settings.AGENTOPS_ENQUEUE_TICKS = True
    worker = Worker("dense", tmp_path, env={
        "AGENTOPS_AGENTS": "bench.agents", "BENCH_MODEL_URL": model_url,
        "AGENTOPS_WORKERS": "1", "AGENTOPS_DB_POOL_MAX": str(POOL_MAX),
        "AGENTOPS_TICK_SLICE_S": "20"})
    worker.start()
    try:
        _warm_up(run_start)
        t0 = time.monotonic()
        ids = [run_start(agent="bench-remote", goal=f"dense {i}", input={}).pk
               for i in range(RUNS)]
        peak_sessions, peak_running = 0, 0
        while time.monotonic() - t0 < 60:
            left = Run.objects.filter(pk__in=ids).exclude(status="succeeded").count()
            peak_sessions = max(peak_sessions, _worker_sessions(worker.pids()))
            peak_running = max(peak_running, Run.objects.filter(pk__in=ids,
                                                                status="running").count())
            if not left:
                break
            time.sleep(0.1)
        wall = time.monotonic() - t0
    finally:
        worker.stop()
    print(f"density: {RUNS} runs x {CALLS} calls of {DELAY_S}s in {wall:.1f}s, "
          f"peak running {peak_running}, peak worker sessions {peak_sessions}")
    statuses = dict(Run.objects.filter(pk__in=ids).values_list("pk", "status"))
    assert set(statuses.values()) == {"succeeded"}, (statuses, (tmp_path / "dense-1.log").read_text())
    # Every run called its slow model at least twice (a tool step, then its answer); the
    # server counts calls per run itself, so a retried call shortens a run, never lengthens it.
    calls = Event.objects.filter(run_id__in=ids, type="model.replied").count()
    assert calls >= RUNS * 2
    # One at a time: 40 x 3 x 0.5 s = 60 s. In flight together: ~1.5 s of model time plus
    # the engine's own work on a loaded 2-core machine.
    assert wall < 20, f"{RUNS} runs took {wall:.1f}s (serial would be {RUNS * CALLS * DELAY_S}s)"
    assert peak_running >= RUNS // 2, f"at most {peak_running} runs were running at once"
    # q2's own sessions (the process and its broker) plus the pool of run slots.
    assert 0 < peak_sessions <= POOL_MAX + 4, f"{peak_sessions} sessions for {RUNS} runs"


def test_leases_of_runs_waiting_on_their_model_are_renewed_together(settings, tmp_path):
    """30 runs wait 4 s on each model call (longer than the 3 s TTL): the keeper renews
    their leases in batches (one UPDATE gives many runs the very same expiry), none of them
    is lost or recovered meanwhile, and all finish."""
    import bench.agents  # noqa: F401
    from runs.services import run_start

    settings.AGENTOPS_ENQUEUE_TICKS = True
    proc, url = model_server_start(4.0, 1)
    worker = Worker("renew", tmp_path, env={
        "AGENTOPS_AGENTS": "bench.agents", "BENCH_MODEL_URL": url, "AGENTOPS_WORKERS": "1",
        "AGENTOPS_LEASE_TTL_S": "3"})
    worker.start()
    shared = 0
    try:
        _warm_up(run_start)
        ids = [run_start(agent="bench-remote", goal=f"renew {i}", input={}).pk
               for i in range(30)]
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            expiries = list(Run.objects.filter(pk__in=ids, status="running")
                            .values_list("lease_expires_at", flat=True))
            if expiries:
                shared = max(shared, max(expiries.count(e) for e in set(expiries)))
            if not Run.objects.filter(pk__in=ids).exclude(status="succeeded").exists():
                break
            time.sleep(0.1)
    finally:
        worker.stop()
        proc.kill()
    recovered = list(Event.objects.filter(run_id__in=ids, type="run.recovered")
                     .values_list("data", flat=True))
    assert not recovered, (recovered[:3], (tmp_path / "renew-1.log").read_text()[-3000:])
    assert set(Run.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"succeeded"}
    assert shared >= 10, f"at most {shared} runs shared one renewal"


def test_a_full_process_pushes_back_and_its_runs_take_turns(settings, tmp_path):
    """5 slots, 15 runs that each call a 0.7 s model 5 times: never more than 5 run at once
    (the q2 task blocks while the slots are full, so q2 takes nothing more), the runs take
    turns by their slices (2 s) and all finish."""
    import bench.agents  # noqa: F401
    from runs.services import run_start

    settings.AGENTOPS_ENQUEUE_TICKS = True
    proc, url = model_server_start(0.7, 4)
    worker = Worker("full", tmp_path, env={
        "AGENTOPS_AGENTS": "bench.agents", "BENCH_MODEL_URL": url, "AGENTOPS_WORKERS": "1",
        "AGENTOPS_RUNS_IN_FLIGHT": "5", "AGENTOPS_TICK_SLICE_S": "2"})
    worker.start()
    peak = 0
    try:
        _warm_up(run_start)
        ids = [run_start(agent="bench-remote", goal=f"full {i}", input={}).pk
               for i in range(15)]
        t0 = time.monotonic()
        while time.monotonic() - t0 < 90:
            peak = max(peak, Run.objects.filter(pk__in=ids, status="running").count())
            if not Run.objects.filter(pk__in=ids).exclude(status="succeeded").exists():
                break
            time.sleep(0.05)
    finally:
        worker.stop()
        proc.kill()
    assert set(Run.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"succeeded"}
    assert 3 <= peak <= 5, f"{peak} runs were running at once with 5 slots"
    sliced = Event.objects.filter(run_id__in=ids, type="run.status",
                                  data__reason="slice_ended").count()
    assert sliced > 0, "no run gave its slot up at the end of its slice"
