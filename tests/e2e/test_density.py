"""Many runs in flight in one worker process: a waiting model call holds a thread, not a process.

A real ``agentops worker`` host with ONE q2 process, a real model server (bench.model_server)
that sleeps on every call, reached through the real ``openai`` client. 40 runs of 3 model
calls each (one tool step) at 1 s a call: one run at a time would take 40 x 3 x 1 = 120 s;
with the runs in flight together it takes a few seconds. The worker's PostgreSQL sessions
stay within its connection pool meanwhile.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.db import connection

from agentops.db_budget import worker_host_sessions_max
from bench.model_server import model_env, model_server_start
from runs.models import Event, Run
from runs.services import run_start
from tests.e2e.workers import Worker

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RUNS, DELAY_S, CALLS = 40, 1.0, 3  # plan is given: calls = steps + the final answer
POOL_MAX = 6


@contextmanager
def _remote_worker(name: str, tmp_path: Path, *, delay_s: float, calls: int,
                   env: dict[str, str]) -> Iterator[Worker]:
    """A model server sleeping ``delay_s`` a call and one ``agentops worker`` (one q2 process)
    running bench-remote against it, warmed up; both stopped after the block."""
    import bench.agents  # noqa: F401  (registers bench-remote in this process too)

    proc, url = model_server_start(delay_s, calls)
    worker = Worker(name, tmp_path, env={
        "AGENTOPS_AGENTS": "bench.agents", **model_env(url), "AGENTOPS_WORKERS": "1",
        **env})
    worker.start()
    try:
        _warm_up()
        yield worker
    finally:
        worker.stop()
        proc.kill()
        proc.wait(5)


def _until_done(ids: list, *, within_s: float, each: Callable[[], None],
                pause_s: float = 0.1) -> None:
    """Call ``each`` every ``pause_s`` until every run in ``ids`` succeeded or time is up."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        each()
        if not Run.objects.filter(pk__in=ids).exclude(status="succeeded").exists():
            return
        time.sleep(pause_s)


def _warm_up() -> None:
    """Have the worker finish one run first: its first tick imports the agents and the model
    SDK, which on a loaded machine can outlast a 3 s lease (the run is then recovered)."""
    pk = run_start(agent="bench-remote", goal="warm up", input={}).pk
    deadline = time.monotonic() + 60
    while Run.objects.filter(pk=pk).exclude(status="succeeded").exists():
        assert time.monotonic() < deadline, "the warm-up run did not finish"
        time.sleep(0.1)


def _worker_sessions(pids: set[int]) -> int:
    """Count the host's sessions: named ``host:pid`` (runs.pooler) or, the lease keeper's,
    ``agentops-lease-keeper-pid`` (runs.engine.runtime.keeper), for a process of the host."""
    names = [f"%:{pid}" for pid in pids] + [f"agentops-lease-keeper-{pid}" for pid in pids]
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE ANY(%s)",
                    [names])
        return cur.fetchone()[0]


def test_one_process_keeps_forty_slow_runs_in_flight(settings, tmp_path):
    settings.AGENTOPS_ENQUEUE_TICKS = True
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "workers": 1}  # the worker's, below
    settings.AGENTOPS_DB_POOL_MAX = POOL_MAX
    budget = worker_host_sessions_max()  # 1 x 6 + 1 lease keeper + 7 = 14
    peak = {"sessions": 0, "running": 0}
    with _remote_worker("dense", tmp_path, delay_s=DELAY_S, calls=CALLS - 1, env={
            "AGENTOPS_DB_POOL_MAX": str(POOL_MAX), "AGENTOPS_TICK_SLICE_S": "20"}) as worker:
        t0 = time.monotonic()
        ids = [run_start(agent="bench-remote", goal=f"dense {i}", input={}).pk
               for i in range(RUNS)]

        def sample() -> None:
            peak["sessions"] = max(peak["sessions"], _worker_sessions(worker.pids()))
            peak["running"] = max(peak["running"], Run.objects.filter(
                pk__in=ids, status="running").count())

        _until_done(ids, within_s=60, each=sample)
        wall = time.monotonic() - t0
    peak_sessions, peak_running = peak["sessions"], peak["running"]
    print(f"density: {RUNS} runs x {CALLS} calls of {DELAY_S}s in {wall:.1f}s, "
          f"peak running {peak_running}, peak worker sessions {peak_sessions}")
    statuses = dict(Run.objects.filter(pk__in=ids).values_list("pk", "status"))
    assert set(statuses.values()) == {"succeeded"}, (statuses, (tmp_path / "dense-1.log").read_text())
    # Every run called its slow model at least twice (a tool step, then its answer); the
    # server counts calls per run itself, so a retried call shortens a run, never lengthens it.
    calls = Event.objects.filter(run_id__in=ids, type="model.replied").count()
    assert calls >= RUNS * 2
    # One at a time: 40 x 3 x 1 s = 120 s. In flight together: ~3 s of model time plus
    # the engine's own work on a loaded 2-core machine. (At 1 s a call a run stays in flight
    # long enough that a loaded machine's slower claims still overlap half the runs.)
    assert wall < 25, f"{RUNS} runs took {wall:.1f}s (serial would be {RUNS * CALLS * DELAY_S}s)"
    assert peak_running >= RUNS // 2, f"at most {peak_running} runs were running at once"
    # At most what agentops doctor budgets for this host (agentops.db_budget: one q2 process
    # x (its pool + the lease keeper) + the host's own sessions), not an exact count: the
    # pool opens connections as slots ask (POOL_MIN idle, more while runs are in flight)
    # and closes idle ones again, the host's threads connect at their first query (12 in
    # three runs here: the pool full, the keeper and five of the seven), and the peak is
    # sampled every 0.1 s, so the figure reached depends on timing.
    assert 0 < peak_sessions <= budget, f"{peak_sessions} sessions for {RUNS} runs"


def test_leases_of_runs_waiting_on_their_model_are_renewed_together(settings, tmp_path):
    """30 runs wait 4 s on each model call (longer than the 3 s TTL): the keeper renews
    their leases in batches (one UPDATE gives many runs the very same expiry), none of them
    is lost or recovered meanwhile, and all finish."""
    settings.AGENTOPS_ENQUEUE_TICKS = True
    shared = {"most": 0}
    with _remote_worker("renew", tmp_path, delay_s=4.0, calls=1,
                        env={"AGENTOPS_LEASE_TTL_S": "3"}):
        ids = [run_start(agent="bench-remote", goal=f"renew {i}", input={}).pk
               for i in range(30)]

        def sample() -> None:
            expiries = list(Run.objects.filter(pk__in=ids, status="running")
                            .values_list("lease_expires_at", flat=True))
            if expiries:
                shared["most"] = max(shared["most"], max(expiries.count(e) for e in set(expiries)))

        _until_done(ids, within_s=60, each=sample)
    recovered = list(Event.objects.filter(run_id__in=ids, type="run.recovered")
                     .values_list("data", flat=True))
    assert not recovered, (recovered[:3], (tmp_path / "renew-1.log").read_text()[-3000:])
    assert set(Run.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"succeeded"}
    assert shared["most"] >= 10, f"at most {shared['most']} runs shared one renewal"


def test_a_full_process_pushes_back_and_its_runs_take_turns(settings, tmp_path):
    """5 slots, 15 runs that each call a 0.7 s model 5 times: never more than 5 run at once
    (the q2 task blocks while the slots are full, so q2 takes nothing more), the runs take
    turns by their slices (2 s) and all finish."""
    settings.AGENTOPS_ENQUEUE_TICKS = True
    peak = {"running": 0}
    with _remote_worker("full", tmp_path, delay_s=0.7, calls=4, env={
            "AGENTOPS_RUNS_IN_FLIGHT": "5", "AGENTOPS_TICK_SLICE_S": "2"}):
        ids = [run_start(agent="bench-remote", goal=f"full {i}", input={}).pk
               for i in range(15)]

        def sample() -> None:
            peak["running"] = max(peak["running"], Run.objects.filter(
                pk__in=ids, status="running").count())

        _until_done(ids, within_s=90, each=sample, pause_s=0.05)
    assert set(Run.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"succeeded"}
    assert 3 <= peak["running"] <= 5, f"{peak['running']} runs were running at once with 5 slots"
    sliced = Event.objects.filter(run_id__in=ids, type="run.status",
                                  data__reason="slice_ended").count()
    assert sliced > 0, "no run gave its slot up at the end of its slice"


def test_a_full_process_keeps_its_runs_past_their_slices_when_nobody_waits(settings, tmp_path):
    """5 slots and 5 runs, each calling a 0.7 s model 5 times, slices of 1 s: every slot is
    busy, but no run is queued, so no run gives its slot up (no re-enqueue through q2)."""
    settings.AGENTOPS_ENQUEUE_TICKS = True
    with _remote_worker("kept", tmp_path, delay_s=0.7, calls=4, env={
            "AGENTOPS_RUNS_IN_FLIGHT": "5", "AGENTOPS_TICK_SLICE_S": "1"}):
        ids = [run_start(agent="bench-remote", goal=f"kept {i}", input={}).pk
               for i in range(5)]
        _until_done(ids, within_s=60, each=lambda: None)
    assert set(Run.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"succeeded"}
    sliced = Event.objects.filter(run_id__in=ids, type="run.status",
                                  data__reason="slice_ended").count()
    assert sliced == 0, f"{sliced} slices ended with nobody waiting for the slot"
