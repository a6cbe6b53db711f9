"""The lease keeper renews a run slot's whole tick by owner, and the fence still holds."""
import datetime as dt
import threading

import pytest
from django.db.models import F

from agentops import clock

from runs.engine.runtime.leases import _KEEPER, _Held, lease_ticked, leases_renew
from runs.engine.runtime.transition import run_claim
from runs.models import Run
from runs.services import run_start
from tests.runs.waits_helpers import later

pytestmark = pytest.mark.django_db


def _claimed(engine, name: str, owner: str = "w:1") -> Run:
    engine.make_agent(name, {"s": [engine.say("ok")]}, plan=["s"])
    return run_claim(run_id=run_start(agent=name, goal="g").pk, owner=owner, ttl_s=3)


def _tick_hold(run: Run, owner: str = "w:1") -> _Held:
    return _Held(run=run, owner=owner, tokens=(), interval=1.0, due=0.0, whole_tick=True)


def test_a_tick_hold_is_renewed_though_its_commits_bumped_the_version(engine):
    runs = [_claimed(engine, f"k{i}") for i in range(3)]
    Run.objects.filter(pk__in=[r.pk for r in runs]).update(version=99)  # units committed
    before = {r.pk: r.lease_expires_at for r in runs}
    with later(2):
        assert leases_renew([_tick_hold(r) for r in runs]) == set()
    for r in Run.objects.filter(pk__in=before):
        assert r.lease_expires_at > before[r.pk] + dt.timedelta(seconds=1.5)


def test_a_run_claimed_by_another_worker_is_lost_and_keeps_its_lease(engine):
    mine, taken = _claimed(engine, "m"), _claimed(engine, "t")
    # The lease of ``taken`` expired, the sweeper re-queued it, another worker claimed it.
    theirs = clock.now() + dt.timedelta(seconds=30)
    Run.objects.filter(pk=taken.pk).update(lease_owner="w:2", lease_expires_at=theirs,
                                           version=F("version") + 2)
    holds = [_tick_hold(mine), _tick_hold(taken)]
    assert leases_renew(holds) == {id(holds[1])}
    taken.refresh_from_db()
    assert taken.lease_owner == "w:2" and taken.lease_expires_at == theirs


def test_a_cancelled_run_is_lost(engine):
    run = _claimed(engine, "c")
    Run.objects.filter(pk=run.pk).update(status="cancelled")
    hold = _tick_hold(run)
    assert leases_renew([hold]) == {id(hold)}


def test_only_a_run_slot_registers_its_tick(engine):
    run = _claimed(engine, "s")
    seen: list[int] = []

    def tick() -> None:
        with lease_ticked(run, "w:1"):
            seen.append(sum(1 for h in list(_KEEPER._held.values()) if h.run is run))

    with lease_ticked(run, "w:1"):  # not a slot (in-process ticks): nothing registered
        seen.append(sum(1 for h in list(_KEEPER._held.values()) if h.run is run))
    slot = threading.Thread(target=tick, name="run-slot:test")
    slot.start()
    slot.join()
    assert seen == [0, 1]
    assert not any(h.run is run for h in _KEEPER._held.values())
