"""A worker process's link to its host's lease keeper (runs.engine.runtime.keeper), for real.

The test process plays the worker: ``keeper_hold`` starts the host's keeper (detached, in this
process group) on its first hold, the keeper renews the run, reports it lost to this process
once another owner has it, and a keeper that dies is replaced with the holds replayed.
"""
from __future__ import annotations

import datetime as dt
import os
import signal
import time

import pytest

from agentops import clock
from agentops.tools import CancelToken
from runs.engine.runtime.keeper import (keeper_address, keeper_hold, keeper_release,
                                        keeper_unwatch, keeper_watch)
from runs.engine.runtime.transition import run_claim
from runs.models import Run
from runs.services import run_start
from tests.e2e.workers import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _keepers() -> list[int]:
    """Return the pids of the keeper processes listening at this process's keeper address."""
    address = keeper_address().encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if b"runs.engine.runtime.keeper_main" in args and address in args:
            found.append(int(pid))
    return found


def _expiry(run_id) -> dt.datetime:
    return Run.objects.values_list("lease_expires_at", flat=True).get(pk=run_id)


def test_a_dead_keeper_is_replaced_with_the_holds_replayed_and_a_loss_reaches_the_holder(
        engine, settings):
    ttl = settings.AGENTOPS_LEASE_TTL_S
    engine.make_agent("link", {"s": [engine.say("ok")]}, plan=["s"])
    run_id = run_start(agent="link", goal="g").pk
    keeper_hold(run_id, "w:1")  # before the claim, as a slot does
    run_claim(run_id=run_id, owner="w:1", ttl_s=ttl)
    token = CancelToken()
    key = keeper_watch(run_id, [token])
    try:
        (first,) = wait_until(_keepers, 5, "the host's keeper to start")
        time.sleep(ttl * 1.5)
        assert _expiry(run_id) > clock.now(), "the keeper did not renew the held run"
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: [p for p in _keepers() if p != first], 5, "another keeper to start")
        time.sleep(ttl * 1.5)  # past the last renewal of the dead keeper
        assert _expiry(run_id) > clock.now(), "the new keeper did not renew the replayed hold"
        Run.objects.filter(pk=run_id).update(lease_owner="w:2")
        wait_until(lambda: token.cancelled, ttl, "the loss to reach this worker's tokens")
        assert len(_keepers()) == 1 and first not in _keepers()
    finally:
        keeper_unwatch(run_id, key)
        keeper_release(run_id, "w:1")


def test_a_run_that_ended_under_its_hold_is_no_warning(engine, settings, caplog):
    """The tick ends its run a moment before it releases its hold: the keeper then finds the
    run no longer leased here. Nothing was lost, so an operator reading the worker's log
    sees no warning (at N = 2,000 one run in seven ended so); a call under way is a loss."""
    ttl = settings.AGENTOPS_LEASE_TTL_S
    engine.make_agent("ended", {"s": [engine.say("ok")]}, plan=["s"])
    ended, busy = (run_start(agent="ended", goal="g").pk for _ in range(2))
    token = CancelToken()
    for run_id in (ended, busy):
        keeper_hold(run_id, "w:1")
        run_claim(run_id=run_id, owner="w:1", ttl_s=ttl)
    key = keeper_watch(busy, [token])
    caplog.set_level("INFO", logger="agentops.leases")
    try:
        time.sleep(ttl * 1.2)  # both renewed once: from then on a miss is reported
        Run.objects.filter(pk__in=[ended, busy]).update(
            status="succeeded", lease_owner="", lease_expires_at=None)
        wait_until(lambda: token.cancelled, ttl * 2, "the busy run's loss to cancel its call")
        wait_until(lambda: any(str(ended) in r.getMessage() for r in caplog.records), ttl * 2,
                   "the ended run's note")
        said = {r.getMessage(): r.levelname for r in caplog.records
                if r.name == "agentops.leases"}
        assert [level for text, level in said.items() if str(ended) in text] == ["INFO"], said
        assert [level for text, level in said.items() if str(busy) in text] == ["WARNING"], said
    finally:
        keeper_unwatch(busy, key)
        for run_id in (ended, busy):
            keeper_release(run_id, "w:1")
