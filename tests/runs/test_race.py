"""Two workers ticking the same runs at once (separate connections): each unit runs once."""
import threading
import time
from collections import Counter

import pytest
from django.db import connection

from runs.engine.runtime.loop import run_tick
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.models import Event, Run
from runs.statuses import ATTENTION, TERMINAL
from runs.sweeper import sweep_once

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def world(settings):
    """The chaos world table; no q2 queue (the test threads are the workers)."""
    from tests import chaos_agents

    settings.AGENTOPS_ENQUEUE_TICKS = False
    settings.AGENTOPS_LEASE_TTL_S = 1.0
    settings.AGENTOPS_BACKOFF_BASE_S = 0.0
    chaos_agents.world_create()
    chaos_agents.SLOW = (0.0, 0.05)
    yield chaos_agents
    chaos_agents.SLOW = (0.1, 0.7)
    chaos_agents.world_drop()


def _worker(name: str, ids: list, stop: threading.Event, start: threading.Barrier) -> None:
    start.wait()
    try:
        while not stop.is_set():
            for run_id in ids:
                run_tick(run_id, worker=name, slice_s=0.05)
    finally:
        connection.close()


def _sweeper(stop: threading.Event) -> None:
    try:
        while not stop.is_set():
            sweep_once(name="race-sweeper")
            time.sleep(0.05)
    finally:
        connection.close()


def test_two_workers_on_the_same_runs_execute_each_unit_once(world):
    from runs.services import run_start

    ids = [run_start(agent="chaos_mixed", goal=f"race {i}", input={"order": f"r{i}"}).pk
           for i in range(4)]
    stop, start = threading.Event(), threading.Barrier(2)
    threads = [threading.Thread(target=_worker, args=(f"w{i}", ids, stop, start))
               for i in range(2)] + [threading.Thread(target=_sweeper, args=(stop,))]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and Run.objects.filter(pk__in=ids).exclude(
            status__in=list(TERMINAL | ATTENTION)).exists():
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(timeout=30)

    assert set(Run.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"succeeded"}
    for run_id in ids:
        replies = Counter((e.data["step"], e.data["turn"])
                          for e in Event.objects.filter(run_id=run_id, type="model.replied"))
        assert max(replies.values()) == 1, replies
        results = Counter(e.data["id"] for e in Event.objects.filter(run_id=run_id,
                                                                     type="tool.result"))
        assert len(results) == 4 and max(results.values()) == 1, results
        assert replay_state(run_id) == load_state(run_id)
    owners = set(Event.objects.filter(run_id__in=ids, type="run.status", data__to="running")
                 .values_list("data__owner", flat=True))
    assert owners == {"w0", "w1"}, "both workers should have won some claims"
    effects = Counter((t, a) for t, _, a in world.world_rows())
    assert len(effects) == 12 and max(effects.values()) == 1, effects
