"""Chaos: real worker processes SIGKILLed or SIGSTOPped at random while ~50 mixed runs execute.

Every other blow is a pause (SIGSTOP longer than the lease TTL, then SIGCONT): the paused
host wakes up believing it still holds its runs, mid-call, while another host has taken
them over. The hosts are busy: 50 runs on 6 worker processes.

Afterwards every run is terminal or waiting for a person, none is lost, no idempotent or
probeable side effect happened twice, every ambiguous unsafe write is ``unknown``, and every
event log replays to its snapshot. Recovery latencies (kill -> the run claimed by another
worker) are printed.
"""
from __future__ import annotations

import datetime as dt
import random
import statistics
import time
from collections import Counter

import pytest
from django.utils import timezone

from approvals.models import Approval
from approvals.statuses import ApprovalStatus
from ledger.models import ToolCall
from runs.engine.runtime.selfcheck import attempts_running_unleased
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.models import Event, Run
from runs.statuses import ATTENTION, STUCK, TERMINAL

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RUNS = 50
BUSY = 12  # long runs started first: every worker process has more work than it can do
CHAOS_S = 60
SETTLE_S = 30
AGENTS = ["chaos_read", "chaos_idem", "chaos_probe", "chaos_unsafe", "chaos_approval",
          "chaos_mixed"]


@pytest.fixture
def world(settings):
    """The world table, fast lease/sweep settings, and the chaos agents registered here too."""
    from tests import chaos_agents

    settings.AGENTOPS_ENQUEUE_TICKS = True
    settings.AGENTOPS_LEASE_TTL_S = 3.0
    settings.AGENTOPS_SWEEP_INTERVAL_S = 1.0
    chaos_agents.world_create()
    yield chaos_agents
    chaos_agents.world_drop()


@pytest.fixture
def workers(world, tmp_path):
    """Three worker hosts, stopped (hard) at the end whatever happens."""
    from tests.e2e.workers import Worker

    hosts = [Worker(f"w{i}", tmp_path) for i in range(3)]
    for w in hosts:
        w.start()
    yield hosts
    for w in hosts:
        w.resume()
        w.stop()


def test_runs_survive_killed_workers(world, workers):
    from runs.services import run_start

    rng = random.Random(4)
    ids: list = []

    def submit() -> None:
        # Runs arrive over the first half of the chaos, so kills land on work in flight.
        due = min(RUNS, int(RUNS * (time.monotonic() - began) / (CHAOS_S / 2)) + 5)
        while len(ids) < due:
            i = len(ids)
            ids.append(run_start(agent=AGENTS[i % len(AGENTS)], goal=f"chaos {i}",
                                 input={"order": f"o{i}"}).pk)

    busy = [run_start(agent="chaos_busy", goal=f"busy {i}", input={"turns": 25}).pk
            for i in range(BUSY)]
    began = time.monotonic()
    kills = _chaos(workers, rng, until=began + CHAOS_S, submit=submit, ids=ids)
    ids.extend(busy)
    _settle(set(ids), until=time.monotonic() + SETTLE_S)
    for w in workers:
        w.stop()

    runs = {r.pk: r for r in Run.objects.filter(pk__in=ids)}
    assert len(runs) == RUNS + BUSY, "a run was lost"
    statuses = Counter(r.status for r in runs.values())
    print(f"\nfinal statuses: {dict(statuses)}; kills and pauses: {len(kills)}")
    stuck = [(str(r.pk)[:8], r.agent_name, r.status) for r in runs.values()
             if r.status not in TERMINAL | ATTENTION]
    assert not stuck, f"runs neither terminal nor needing a person: {stuck}"
    _assert_effects(world.world_rows())
    # Issue 39 item 4: no straggler, no attempt running without a live lease (the /metrics gauge).
    assert attempts_running_unleased() == {}, "attempts running with nobody holding them"
    for run_id in ids:
        assert replay_state(run_id) == load_state(run_id), f"run {run_id} does not replay"
    latencies = _latencies(kills)
    print(f"recovery latencies (s) over {len(latencies)} interrupted runs: "
          f"{[round(x, 1) for x in sorted(latencies)]}")
    if latencies:
        print(f"median {statistics.median(latencies):.1f}s, max {max(latencies):.1f}s")
        assert max(latencies) < 20


def _chaos(workers, rng, *, until: float, submit, ids: list) -> list[tuple[dt.datetime, set[str]]]:
    kills = []
    next_kill = time.monotonic() + 3
    while time.monotonic() < until:
        submit()
        _decide_approvals(rng)
        if len(ids) >= RUNS and not Run.objects.filter(pk__in=ids).exclude(
                status__in=list(TERMINAL | ATTENTION)).exists():
            break
        if time.monotonic() >= next_kill:
            victim = rng.choice(workers)
            owners = {f"{_host()}:{pid}" for pid in victim.pids()}
            pause = len(kills) % 2 == 1
            victim.pause() if pause else victim.kill()
            held = set(Run.objects.filter(status="running", lease_owner__in=owners)
                       .values_list("pk", flat=True))
            kills.append((timezone.now(), {str(i) for i in held}))
            if pause:
                time.sleep(rng.uniform(3.5, 5.0))  # past the 3 s lease: others take over
                victim.resume()
            else:
                time.sleep(rng.uniform(0.5, 2.0))
                victim.start()
            next_kill = time.monotonic() + rng.uniform(3, 6)
        time.sleep(0.3)
    return kills


def _settle(ids: set, *, until: float) -> None:
    rng = random.Random(5)
    while time.monotonic() < until:
        _decide_approvals(rng)
        busy = Run.objects.filter(pk__in=ids).exclude(status__in=list(TERMINAL | ATTENTION))
        waiting_on_system = Run.objects.filter(pk__in=ids, status="waiting").exclude(
            wait_kind="approval")
        if not busy.exists() and not waiting_on_system.exists():
            return
        time.sleep(0.5)


def _decide_approvals(rng) -> None:
    from django.contrib.auth.models import User

    from approvals.errors import AlreadyDecided, StaleApproval
    from approvals.services import approval_decide

    decider, _ = User.objects.get_or_create(username="chaos-support")
    for a in Approval.objects.filter(status=ApprovalStatus.PENDING, run__status="waiting"):
        try:
            approval_decide(approval=a, user=decider, approve=rng.random() < 0.7,
                            reason="decided by the chaos test")
        except (AlreadyDecided, StaleApproval):
            pass  # a sweeper or an earlier pass settled it first


def _assert_effects(rows) -> None:
    by_key = Counter((t, k) for t, k, _ in rows)
    by_arg = Counter((t, a) for t, _, a in rows)
    doubled = [x for x, n in {**by_key, **by_arg}.items() if n > 1]
    assert not doubled, f"side effects happened twice: {doubled}"
    effected = {k for t, k, _ in rows if t == "email"}
    for c in ToolCall.objects.filter(tool="email"):
        if c.idempotency_key in effected:
            assert c.status in ("succeeded", "unknown"), (c.tool_call_id, c.status)
        if c.status == "unknown":
            # A write left in flight is unknown until a person confirms it: its run waits
            # for that person, as unknown (a worker found it) or blocked (the recovery limit
            # or the straggler sweep closed it, runs/engine/runtime/stragglers.py), or ended.
            assert c.run.status in STUCK | TERMINAL, (c.tool_call_id, c.run.status)


def _latencies(kills) -> list[float]:
    out = []
    for at, held in kills:
        for run_id in held:
            claim = (Event.objects.filter(run_id=run_id, at__gt=at, type="run.status",
                                          data__to="running").order_by("seq").first())
            if claim is not None:
                out.append((claim.at - at).total_seconds())
    return out


def _host() -> str:
    import socket

    return socket.gethostname()
