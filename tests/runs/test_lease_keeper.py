"""The lease keeper process renews held runs by owner, reports lost ones, pauses and exits with its worker.

Each test starts the real program (``python -m runs.engine.runtime.keeper_main``) against the
test database, the way runs.engine.runtime.keeper does; a ``sleep`` child stands in for the
worker when the test stops or kills it.
"""
from __future__ import annotations

import datetime as dt
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db.models import F

from agentops import clock
from runs.engine.runtime.keeper import keeper_dsn
from runs.engine.runtime.transition import run_claim
from runs.models import Run
from runs.services import run_start

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
TTL = 1.5


def _claimed(engine, name: str, owner: str = "w:1") -> Run:
    engine.make_agent(name, {"s": [engine.say("ok")]}, plan=["s"])
    return run_claim(run_id=run_start(agent=name, goal="g").pk, owner=owner, ttl_s=TTL)


@contextmanager
def _keeper(worker_pid: int | None = None) -> Iterator[subprocess.Popen]:
    """The keeper program for ``worker_pid`` (this test process by default)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "runs.engine.runtime.keeper_main", "--ttl", str(TTL),
         "--worker-pid", str(worker_pid or os.getpid())],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
        env={**os.environ, "AGENTOPS_KEEPER_DSN": keeper_dsn()})
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(5)


def _hold(proc: subprocess.Popen, run: Run, owner: str = "w:1") -> None:
    proc.stdin.write(f"hold {run.pk} {owner}\n")
    proc.stdin.flush()


def _expiry(run: Run) -> dt.datetime:
    return Run.objects.values_list("lease_expires_at", flat=True).get(pk=run.pk)


def _lines(proc: subprocess.Popen, within_s: float) -> list[str]:
    """Return what the keeper printed within ``within_s``."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    got, end = [], time.monotonic() + within_s
    while time.monotonic() < end:
        if sel.select(timeout=max(0.0, end - time.monotonic())):
            got.append(proc.stdout.readline().strip())
    return got


def test_held_runs_are_renewed_though_their_commits_bumped_the_version(engine):
    runs = [_claimed(engine, f"k{i}") for i in range(3)]
    Run.objects.filter(pk__in=[r.pk for r in runs]).update(version=F("version") + 5)
    with _keeper() as proc:
        for run in runs:
            _hold(proc, run)
        time.sleep(TTL * 2)  # past the claim's own lease
        assert all(_expiry(r) > clock.now() + dt.timedelta(seconds=TTL / 2) for r in runs)
        assert proc.poll() is None
    # Renewal never bumps the version: the slot's next commit still matches.
    assert {r.version for r in Run.objects.filter(pk__in=[r.pk for r in runs])} == \
        {runs[0].version + 5}


def test_a_run_claimed_by_another_worker_is_reported_lost_and_keeps_its_lease(engine):
    mine, taken = _claimed(engine, "m"), _claimed(engine, "t")
    with _keeper() as proc:
        _hold(proc, mine)
        _hold(proc, taken)
        time.sleep(TTL / 3 + 0.3)  # renewed once: both matched
        theirs = clock.now() + dt.timedelta(seconds=30)
        Run.objects.filter(pk=taken.pk).update(lease_owner="w:2", lease_expires_at=theirs)
        assert _lines(proc, TTL) == [f"lost {taken.pk}"]
    assert _expiry(taken) == theirs
    assert _expiry(mine) > clock.now()


def test_a_held_run_not_claimed_yet_waits_for_its_claim(engine):
    """The worker holds a run before claiming it: a miss then is not a loss."""
    engine.make_agent("late", {"s": [engine.say("ok")]}, plan=["s"])
    run = run_start(agent="late", goal="g")
    with _keeper() as proc:
        _hold(proc, run)
        assert _lines(proc, TTL / 2) == []
        run_claim(run_id=run.pk, owner="w:1", ttl_s=TTL)
        time.sleep(TTL)
        assert _expiry(run) > clock.now() + dt.timedelta(seconds=TTL / 2)


def test_a_call_past_its_deadline_is_not_renewed_and_its_recovery_is_reported(engine):
    """A slot inside a call past its deadline is hung: its lease runs out (the other run's
    is renewed), a bad deadline changes nothing, and once the run is recovered elsewhere
    the keeper reports it lost. ``done`` before the deadline renews as before."""
    hung, busy, back = _claimed(engine, "h"), _claimed(engine, "b"), _claimed(engine, "d")
    with _keeper() as proc:
        for run in (hung, busy, back):
            _hold(proc, run)
        proc.stdin.write(f"call {hung.pk} w:1 {time.time() + 0.2:.3f}\n"
                         f"call {busy.pk} w:1 not-a-time\n"
                         f"call {back.pk} w:1 {time.time() + 0.2:.3f}\n"
                         f"done {back.pk} w:1\n")
        proc.stdin.flush()
        time.sleep(TTL * 1.5)
        assert _expiry(hung) < clock.now(), "a hung call's lease was renewed"
        assert _expiry(busy) > clock.now() and _expiry(back) > clock.now()
        Run.objects.filter(pk=hung.pk).update(lease_owner="sweeper-recovered", status="queued")
        assert _lines(proc, TTL) == [f"lost {hung.pk}"]


def test_a_cancelled_run_is_reported_lost(engine):
    run = _claimed(engine, "c")
    with _keeper() as proc:
        _hold(proc, run)
        time.sleep(TTL / 3 + 0.3)
        Run.objects.filter(pk=run.pk).update(status="cancelled")
        assert _lines(proc, TTL) == [f"lost {run.pk}"]


def test_a_stopped_worker_gets_nothing_renewed_and_an_ended_one_ends_its_keeper(engine):
    run = _claimed(engine, "p")
    worker = subprocess.Popen(["sleep", "60"])
    try:
        with _keeper(worker.pid) as proc:
            _hold(proc, run)
            time.sleep(TTL / 3 + 0.3)
            os.kill(worker.pid, signal.SIGSTOP)
            time.sleep(0.3)
            stopped_at = _expiry(run)
            time.sleep(TTL * 1.5)
            assert _expiry(run) == stopped_at < clock.now(), "a stopped worker's lease was renewed"
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait(5)
            proc.wait(timeout=1.5)  # the pid is gone: the keeper exits by itself
    finally:
        worker.kill()


def test_the_keeper_outlives_sigterm_and_exits_when_its_worker_closes_the_pipe(engine):
    """A stopping host signals its whole group; the worker then drains its slots, leases kept."""
    with _keeper() as proc:
        time.sleep(1.0)  # started: psycopg imported, the signals ignored
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert proc.poll() is None
        proc.stdin.close()
        assert proc.wait(timeout=1.5) == 0


_PARENT = """
import os, subprocess, sys, time
proc = subprocess.Popen([sys.executable, "-m", "runs.engine.runtime.keeper_main", "--ttl", "3",
                         "--worker-pid", str(os.getpid())], stdin=subprocess.PIPE)
print(proc.pid, flush=True)
time.sleep(60)
"""


def test_the_keeper_exits_when_its_worker_is_killed(engine):
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "AGENTOPS_KEEPER_DSN": keeper_dsn()})
    keeper_pid = int(parent.stdout.readline())
    parent.kill()
    parent.wait(5)
    deadline = time.monotonic() + 1.0
    while os.path.exists(f"/proc/{keeper_pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    # Re-parented to init, which reaps it: gone, not a zombie left renewing.
    assert not os.path.exists(f"/proc/{keeper_pid}") or \
        open(f"/proc/{keeper_pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"


def test_off_a_slot_the_keeper_thread_leaves_a_call_past_its_deadline_unrenewed(engine,
                                                                               settings):
    """An in-process tick (no run slot, the keeper thread): a read tool that declares no
    timeout runs past the promised default; from then its lease is not renewed, though the
    thread is alive, so a sweeper could recover the run (fencing's hard deadline)."""
    import threading

    from agentops.agents import Agent, StepSpec, registry
    from agentops.llm.scripted import ScriptedModel, call, say
    from agentops.tools import ToolResult, tool
    from runs.engine.runtime.loop import run_tick

    release = threading.Event()

    @tool(effect="read")
    def stall(ctx, n: int) -> ToolResult:
        """Wait until the test lets go."""
        release.wait(30)
        return ToolResult(facts={"n": n}, summary="ok")

    settings.AGENTOPS_LEASE_TTL_S = TTL
    settings.AGENTOPS_TOOL_TIMEOUT_S = 0.3
    registry.register(Agent(name="stall", version="1", system_prompt="t", tools=[stall],
                            plan=[StepSpec("s")],
                            model=lambda: ScriptedModel({"s": [call("stall", n=1), say("ok")]})))
    run = run_start(agent="stall", goal="g")
    ticked: list[str] = []
    def tick() -> None:
        from django.db import connection

        try:
            ticked.append(run_tick(run.pk, worker="w:1"))
        finally:
            connection.close()

    thread = threading.Thread(target=tick)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while Run.objects.get(pk=run.pk).status != "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3 + TTL / 3 + TTL + 0.5)  # timeout + grace, then a whole TTL
        assert _expiry(run) < clock.now(), "a call past its deadline kept its lease"
    finally:
        release.set()
        thread.join(30)
    assert ticked == ["succeeded"]  # nobody recovered it meanwhile: its commits still match
    # With no call left to keep, the keeper thread ends and closes its database session (an
    # idle one kept it open to the end: the test database could not be dropped).
    deadline = time.monotonic() + 2
    while any(t.name == "lease-keeper" for t in threading.enumerate()) and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(t.name == "lease-keeper" for t in threading.enumerate())
