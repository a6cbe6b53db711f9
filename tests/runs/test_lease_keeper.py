"""The lease keeper process renews held runs by owner, reports lost ones to their holder, pauses
with a stopped worker, drops a dead one's holds, and exits once no worker is connected.

Each test starts the real program (``python -m runs.engine.runtime.keeper_main``) against the
test database on an address of its own, the way runs.engine.runtime.keeper does; a small relay
process stands in for each worker (its stdin goes to the keeper, the keeper's lines to its
stdout), so a test can stop or kill a "worker" and the keeper sees that process do it.
"""
from __future__ import annotations

import datetime as dt
import os
import selectors
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db.models import F

from agentops import clock
from runs.engine.runtime.keeper import keeper_dsn
from runs.engine.runtime.keeper_main import _IDLE_EXIT_S
from runs.engine.runtime.transition import run_claim
from runs.models import Run
from runs.services import run_start

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
TTL = 1.5
# A worker: relays its stdin to the keeper and the keeper's lines to its stdout.
_RELAY = """
import socket, sys, threading, time
s = socket.socket(socket.AF_UNIX)
for _ in range(100):
    try:
        s.connect("\\0" + sys.argv[1])
        break
    except ConnectionRefusedError:
        time.sleep(0.05)
def back():
    while chunk := s.recv(65536):
        sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
threading.Thread(target=back, daemon=True).start()
for line in sys.stdin.buffer:
    s.sendall(line)
"""


def _claimed(engine, name: str, owner: str = "w:1") -> Run:
    engine.make_agent(name, {"s": [engine.say("ok")]}, plan=["s"])
    return run_claim(run_id=run_start(agent=name, goal="g").pk, owner=owner, ttl_s=TTL)


@contextmanager
def _keeper(*extra: str) -> Iterator[subprocess.Popen]:
    """The keeper program on an address of its own (``proc.address``)."""
    address = f"agentops-test-keeper-{uuid.uuid4().hex}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "runs.engine.runtime.keeper_main", "--ttl", str(TTL),
         "--address", address, *extra],
        env={**os.environ, "AGENTOPS_KEEPER_DSN": keeper_dsn()})
    proc.address = address  # type: ignore[attr-defined]
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(5)


@contextmanager
def _worker(keeper: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """A worker process connected to ``keeper``: write lines to its stdin, read its stdout."""
    proc = subprocess.Popen([sys.executable, "-c", _RELAY, keeper.address],  # type: ignore
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
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
    with _keeper() as keeper, _worker(keeper) as proc:
        for run in runs:
            _hold(proc, run)
        time.sleep(TTL * 2)  # past the claim's own lease
        assert all(_expiry(r) > clock.now() + dt.timedelta(seconds=TTL / 2) for r in runs)
        assert keeper.poll() is None
    # Renewal never bumps the version: the slot's next commit still matches.
    assert {r.version for r in Run.objects.filter(pk__in=[r.pk for r in runs])} == \
        {runs[0].version + 5}


def test_a_run_claimed_by_another_worker_is_reported_lost_and_keeps_its_lease(engine):
    mine, taken = _claimed(engine, "m"), _claimed(engine, "t")
    with _keeper() as keeper, _worker(keeper) as proc:
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
    with _keeper() as keeper, _worker(keeper) as proc:
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
    with _keeper() as keeper, _worker(keeper) as proc:
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
    with _keeper() as keeper, _worker(keeper) as proc:
        _hold(proc, run)
        time.sleep(TTL / 3 + 0.3)
        Run.objects.filter(pk=run.pk).update(status="cancelled")
        assert _lines(proc, TTL) == [f"lost {run.pk}"]


def test_a_stopped_worker_gets_nothing_renewed_while_another_worker_s_runs_are(engine):
    """Two workers share one keeper: SIGSTOP one and only its lease runs out; a run it held
    that is then taken is reported to it alone, once it runs again."""
    stopped, running = _claimed(engine, "p", owner="w:1"), _claimed(engine, "q", owner="w:2")
    with _keeper() as keeper, _worker(keeper) as one, _worker(keeper) as two:
        _hold(one, stopped, "w:1")
        _hold(two, running, "w:2")
        time.sleep(TTL / 3 + 0.3)
        os.kill(one.pid, signal.SIGSTOP)
        time.sleep(0.3)
        stopped_at = _expiry(stopped)
        time.sleep(TTL * 1.5)
        assert _expiry(stopped) == stopped_at < clock.now(), "a stopped worker's lease was renewed"
        assert _expiry(running) > clock.now(), "the running worker's lease expired"
        Run.objects.filter(pk=stopped.pk).update(lease_owner="w:3")
        os.kill(one.pid, signal.SIGCONT)
        assert _lines(one, TTL) == [f"lost {stopped.pk}"]
        assert _lines(two, 0.2) == []


def test_a_killed_worker_s_holds_go_at_once_and_the_keeper_serves_the_others(engine):
    """SIGKILL the worker that connected first: nothing of it is renewed any more (its
    socket closed with it), the other's run still is, and the keeper runs on."""
    dead, alive = _claimed(engine, "x", owner="w:1"), _claimed(engine, "y", owner="w:2")
    with _keeper() as keeper, _worker(keeper) as one, _worker(keeper) as two:
        _hold(one, dead, "w:1")
        _hold(two, alive, "w:2")
        time.sleep(TTL / 3 + 0.3)
        one.kill()
        one.wait(5)
        time.sleep(0.2)
        killed_at = _expiry(dead)
        time.sleep(TTL * 1.5)
        assert _expiry(dead) == killed_at < clock.now(), "a dead worker's lease was renewed"
        assert _expiry(alive) > clock.now(), "the other worker's lease expired"
        assert keeper.poll() is None


def test_the_keeper_outlives_sigterm_and_exits_once_no_worker_is_connected(engine):
    """A stopping host signals its whole group; the workers then drain their slots, leases
    kept. Once the last worker is gone the keeper exits by itself, within its idle time."""
    with _keeper() as keeper:
        with _worker(keeper) as proc:
            time.sleep(1.0)  # started, the signals ignored
            keeper.send_signal(signal.SIGTERM)
            time.sleep(_IDLE_EXIT_S + 0.5)  # a worker connected all along: no idle exit
            assert keeper.poll() is None
            proc.stdin.close()
            proc.wait(5)
            gone = time.monotonic()
        assert keeper.wait(timeout=_IDLE_EXIT_S + 1.5) == 0
        assert time.monotonic() - gone >= _IDLE_EXIT_S - 0.2, "the keeper left at once"


def test_a_second_keeper_on_a_taken_address_exits_and_leaves_the_first(engine):
    """Two workers starting the keeper at once: the bind is the lock, the loser exits at once
    (its worker then connects to the winner), and a detached keeper returns once bound."""
    with _keeper() as first, _worker(first) as proc:
        time.sleep(0.5)
        second = subprocess.run(
            [sys.executable, "-m", "runs.engine.runtime.keeper_main", "--ttl", str(TTL),
             "--address", first.address, "--detach"],  # type: ignore[attr-defined]
            env={**os.environ, "AGENTOPS_KEEPER_DSN": keeper_dsn()}, timeout=10)
        assert second.returncode == 0
        assert first.poll() is None and proc.poll() is None


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


def test_off_a_slot_model_and_tool_calls_in_a_row_share_one_keeper_thread(engine):
    """In-process ticks hand the keeper thread a call every few milliseconds, each gone
    before the thread looks: it stays up while they come (a new thread every second made
    the worker wait for each one to start) and ends only once they stop."""
    from runs.engine.runtime import leases

    run = _claimed(engine, "short")
    threads = set()
    end = time.monotonic() + leases._IDLE_EXIT_S * 2
    while time.monotonic() < end:
        with leases.lease_kept(run, "w:1", []):
            threads.add(leases._KEEPER._thread)
        time.sleep(0.005)
    assert len(threads) == 1
