"""A recovered run does not wait behind busy workers' slices: a busy tick yields to it.

Drives ``runs.tasks.tick`` (the q2 entry point) in process with ticks enqueued for real
(q2's ORM queue), so the yield, the re-enqueue and the hand-over are the production path.
"""
from __future__ import annotations

import datetime as dt

import pytest

from agentops import clock
from runs.engine.runtime.recovery import runs_recover_expired
from runs.models import Event, Run
from runs.services import run_start
from runs.tasks import tick, worker_name

pytestmark = pytest.mark.django_db


def _busy_script(sc):
    from agentops.llm.scripted import call, say

    return call("lookup", item=f"i{sc.turn}") if sc.turn <= 10_000 else say("done")


def test_a_busy_tick_yields_to_a_recovered_run_and_takes_it(engine, settings):
    from django_q.models import OrmQ

    settings.AGENTOPS_ENQUEUE_TICKS = True
    # One run per process (SQLite's default): the q2 task runs the tick itself. A process
    # with run slots (runs.slots) yields only once they are all busy.
    settings.AGENTOPS_RUNS_IN_FLIGHT = 1
    settings.AGENTOPS_YIELD_CHECK_S = 0.0
    settings.AGENTOPS_URGENT_GRACE_S = 0.0
    settings.AGENTOPS_TICK_SLICE_S = 30
    engine.make_agent("busy", _busy_script, plan=["s"], max_turns_per_step=100_000)
    engine.make_agent("lost", {"s": [engine.say("ok")]}, plan=["s"])
    lost = run_start(agent="lost", goal="g")
    # Its worker died: running, lease long expired; the sweeper queues it as urgent.
    Run.objects.filter(pk=lost.pk).update(status="running", lease_owner="dead-host:1",
                                          lease_expires_at=clock.now() - dt.timedelta(seconds=9))
    assert runs_recover_expired() == [lost.pk]
    lost.refresh_from_db()
    assert lost.urgent and lost.status == "queued"
    busy = run_start(agent="busy", goal="g")
    OrmQ.objects.all().delete()

    assert tick(str(busy.pk)) == "yielded"

    busy.refresh_from_db()
    lost.refresh_from_db()
    assert busy.status == "queued"  # its turn ends early, it goes back in the queue
    assert OrmQ.objects.count() == 1
    assert lost.status == "succeeded" and not lost.urgent
    claim = Event.objects.filter(run=lost, type="run.status", data__to="running").last()
    assert claim.data["owner"] == worker_name()


def test_no_yield_when_nothing_is_urgent(engine, settings):
    settings.AGENTOPS_ENQUEUE_TICKS = True
    # One run per process (SQLite's default): the q2 task runs the tick itself. A process
    # with run slots (runs.slots) yields only once they are all busy.
    settings.AGENTOPS_RUNS_IN_FLIGHT = 1
    settings.AGENTOPS_YIELD_CHECK_S = 0.0
    engine.make_agent("calm", {"s": [engine.call("lookup", item="x"), engine.say("ok")]},
                      plan=["s"])
    run = run_start(agent="calm", goal="g")
    assert tick(str(run.pk)) == "succeeded"
