"""The lease keeper process of a real worker host: one for all its q2 processes; it pauses for a
stopped worker only, drops a killed one's holds at once (outliving it when it started the
keeper), and keeps a busy one's leases.

Real ``agentops worker`` hosts (run slots on PostgreSQL) run ``bench-remote`` runs against a
real model server (bench.model_server) that sleeps on every call. The first q2 process to
need it starts the keeper (``python -m runs.engine.runtime.keeper_main``) on its first slotted
tick, in the host's process group; the others connect to it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agentops import clock
from bench.model_server import model_env, model_server_start
from runs.models import Event, Run
from runs.services import run_start
from tests.e2e.workers import Worker, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
TTL_S, SWEEP_S = 3.0, 0.5


@contextmanager
def _hosts(tmp_path: Path, n: int, *, delay_s: float, calls: int,
           workers: int = 1) -> Iterator[list[Worker]]:
    """A model server and ``n`` worker hosts (``workers`` q2 processes each) serving bench-remote."""
    import bench.agents  # noqa: F401  (registers bench-remote in this process too)

    server, url = model_server_start(delay_s, calls)
    hosts = [Worker(f"k{i}", tmp_path, env={
        "AGENTOPS_AGENTS": "bench.agents", **model_env(url), "AGENTOPS_WORKERS": str(workers),
        "AGENTOPS_LEASE_TTL_S": str(TTL_S), "AGENTOPS_SWEEP_INTERVAL_S": str(SWEEP_S),
        "AGENTOPS_TICK_SLICE_S": "20"}) for i in range(n)]
    for host in hosts:
        host.start()
    try:
        yield hosts
    finally:
        for host in hosts:
            host.resume()
            host.stop()
        server.kill()
        server.wait(5)




def _owners_in(host: Worker, ids: list) -> dict:
    """Return {run id: owner} of the runs a q2 process of ``host`` holds now."""
    pids = host.pids()
    return {pk: owner for pk, owner in Run.objects.filter(pk__in=ids, status="running")
            .values_list("pk", "lease_owner") if int(owner.rsplit(":", 1)[1]) in pids}


def _keepers_of(host: Worker) -> list[int]:
    """Return the pids of the keeper processes in ``host``'s process group."""
    return [pid for pid in host.pids() if b"keeper_main" in _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _pid_of(owner: str) -> int:
    return int(owner.rsplit(":", 1)[1])


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_stopped_worker_s_keeper_pauses_and_another_worker_recovers_its_runs(settings, tmp_path):
    """SIGSTOP one q2 process (its keeper left running): its leases expire within TTL +
    sweep, and the other host recovers and claims every one of its runs."""
    settings.AGENTOPS_ENQUEUE_TICKS = True
    with _hosts(tmp_path, 2, delay_s=0.5, calls=1000) as hosts:
        ids = [run_start(agent="bench-remote", goal=f"stop {i}", input={}).pk for i in range(12)]
        # Either host may take the ticks first (on a loaded machine one may take all 12):
        # stop the one that holds runs, and the other must recover them.
        a = wait_until(lambda: next((h for h in hosts if _owners_in(h, ids)), None), 40,
                       "a host to hold runs")
        b = next(h for h in hosts if h is not a)
        time.sleep(1.5)  # a full renewal round under way
        held = _owners_in(a, ids)
        owner = next(iter(held.values()))
        (keeper_pid,) = _keepers_of(a)
        os.killpg(a.proc.pid, signal.SIGSTOP)  # the whole host: q2 must not hoard the ticks
        os.kill(keeper_pid, signal.SIGCONT)  # ... but its keeper runs on, and must pause
        stopped = time.monotonic()

        def recovered() -> bool:
            return Event.objects.filter(run_id__in=held, type="run.recovered",
                                        data__lost_owner=owner).count() == len(held)

        wait_until(recovered, TTL_S + SWEEP_S + 6, f"the {len(held)} runs of the stopped worker "
                                              "to be recovered")
        took = time.monotonic() - stopped
        assert _alive(keeper_pid), "the keeper of a stopped (not dead) worker exited"
        b_pids = b.pids()
        wait_until(lambda: all(int(o.rsplit(":", 1)[1]) in b_pids for o in Run.objects.filter(
            pk__in=held).values_list("lease_owner", flat=True) if o), 20,
            "host b to claim the recovered runs")
    print(f"keeper: {len(held)} runs of a stopped worker recovered {took:.1f}s after SIGSTOP")
    # The last renewal came at most TTL/3 before the stop (later on a loaded host): the
    # leases ran out on their own, not at once.
    assert took >= TTL_S / 2, f"leases of a stopped worker ended after {took:.1f}s"


def _two_workers_holding(host: Worker, ids: list) -> dict[int, list]:
    """Wait until both q2 processes of ``host`` hold runs; return {pid: [run ids]}."""
    def both() -> dict[int, list] | None:
        by_pid: dict[int, list] = {}
        for pk, owner in _owners_in(host, ids).items():
            by_pid.setdefault(_pid_of(owner), []).append(pk)
        return by_pid if len(by_pid) == 2 else None

    return wait_until(both, 60, "both q2 processes to hold runs")


def _recovered_from(ids: list, pid: int) -> int:
    """Return how many of ``ids`` were recovered from the q2 process ``pid``."""
    return sum(1 for owner in Event.objects.filter(run_id__in=ids, type="run.recovered")
               .values_list("data__lost_owner", flat=True) if owner and _pid_of(owner) == pid)


def _renewed(ids: list, pid: int) -> bool:
    """True when every one of ``ids`` still running under ``pid`` has a lease ahead of now."""
    rows = Run.objects.filter(pk__in=ids, status="running").values_list(
        "lease_owner", "lease_expires_at")
    return all(expires > clock.now() for owner, expires in rows if _pid_of(owner) == pid)


def test_one_keeper_serves_a_host_and_pauses_only_for_a_stopped_worker(settings, tmp_path):
    """A 2-process host runs one keeper process for both. SIGSTOP one q2 process: its runs'
    leases expire and are recovered; the other's are renewed all along (none recovered)."""
    settings.AGENTOPS_ENQUEUE_TICKS = True
    with _hosts(tmp_path, 1, delay_s=0.5, calls=1000, workers=2) as (a,):
        ids = [run_start(agent="bench-remote", goal=f"share {i}", input={}).pk for i in range(24)]
        held = _two_workers_holding(a, ids)
        assert len(_keepers_of(a)) == 1, [_cmdline(p) for p in _keepers_of(a)]
        stopped, running = sorted(held)
        os.kill(stopped, signal.SIGSTOP)
        wait_until(lambda: _recovered_from(held[stopped], stopped) == len(held[stopped]),
                   TTL_S + SWEEP_S + 8, "the stopped q2 process's runs to be recovered")
        for _ in range(int(TTL_S * 2 / 0.5)):  # two TTLs more: the other's leases still renew
            assert _renewed(ids, running), "the running q2 process's leases expired"
            time.sleep(0.5)
        assert _recovered_from(ids, running) == 0
        assert len(_keepers_of(a)) == 1


def test_the_keeper_outlives_the_killed_worker_that_started_it(settings, tmp_path):
    """SIGKILL the q2 process that started the host's keeper: the keeper runs on, the dead
    process's runs are recovered at once (its holds went with its socket), and the other q2
    process's leases are renewed all along."""
    settings.AGENTOPS_ENQUEUE_TICKS = True
    with _hosts(tmp_path, 1, delay_s=0.5, calls=1000, workers=2) as (a,):
        ids = [run_start(agent="bench-remote", goal=f"kill {i}", input={}).pk for i in range(24)]
        held = _two_workers_holding(a, ids)
        (keeper_pid,) = _keepers_of(a)
        args = _cmdline(keeper_pid).split(b"\0")
        starter = int(args[args.index(b"--started-by") + 1])
        (other,) = set(held) - {starter}
        os.kill(starter, signal.SIGKILL)  # the q2 process alone: no handler runs
        wait_until(lambda: _recovered_from(held[starter], starter) == len(held[starter]),
                   TTL_S + SWEEP_S + 8, "the killed q2 process's runs to be recovered")
        for _ in range(int(TTL_S * 2 / 0.5)):
            assert _renewed(ids, other), "the other q2 process's leases expired"
            time.sleep(0.5)
        assert _alive(keeper_pid), "the keeper died with the worker that started it"
        assert _recovered_from(ids, other) == 0


_BURN = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass\n"


def test_a_busy_worker_loses_no_lease(settings, tmp_path):
    """120 runs in flight in one q2 process while two CPU burners load the host's 2 cores:
    the slot threads queue for the GIL and the CPU, the keeper process still renews every
    lease (0 recoveries) and every run finishes."""
    settings.AGENTOPS_ENQUEUE_TICKS = True
    burners = [subprocess.Popen([sys.executable, "-c", _BURN]) for _ in range(2)]
    try:
        with _hosts(tmp_path, 1, delay_s=0.3, calls=6) as (a,):
            ids = [run_start(agent="bench-remote", goal=f"busy {i}", input={}).pk
                   for i in range(120)]
            wait_until(lambda: not Run.objects.filter(pk__in=ids).exclude(
                status="succeeded").exists(), 50, "the runs to finish")
    finally:
        for p in burners:
            p.kill()
            p.wait(5)
    recovered = list(Event.objects.filter(run_id__in=ids, type="run.recovered")
                     .values_list("data", flat=True))
    assert not recovered, (len(recovered), recovered[:3])


def test_a_hung_worker_s_run_is_recovered_once_its_call_is_past_its_deadline(settings, tmp_path):
    """A slot thread stuck inside a tool that declares no timeout (and ignores cancellation)
    while its process runs on: the keeper process stops renewing once the call is past the
    promised default timeout (AGENTOPS_TOOL_TIMEOUT_S) + TTL/3, the lease expires, and another
    host recovers the run and finishes it; never before the attempt's hard deadline."""
    import tests.chaos_agents  # noqa: F401  (registers chaos_hang in this process too)

    settings.AGENTOPS_ENQUEUE_TICKS = True
    marker = tmp_path / "hung"
    env = {"AGENTOPS_WORKERS": "1", "AGENTOPS_TOOL_TIMEOUT_S": "2"}
    a, b = Worker("hung-a", tmp_path, env=env), Worker("hung-b", tmp_path, env=env)
    a.start()
    try:
        run_id = run_start(agent="chaos_hang", goal="hang", input={"marker": str(marker)}).pk
        wait_until(marker.exists, 40, "the tool to start (and hang)")
        called, a_pids = time.monotonic(), a.pids()
        b.start()
        wait_until(lambda: Event.objects.filter(run_id=run_id, type="run.recovered").exists(),
                   40, "the hung worker's run to be recovered")
        took = time.monotonic() - called
        assert a.proc.poll() is None, "the hung worker exited: this is not the hung case"
        wait_until(lambda: Run.objects.get(pk=run_id).status == "succeeded", 40,
                   "the recovered run to finish on the other host")
    finally:
        a.stop()
        b.stop()
    lost = Event.objects.get(run_id=run_id, type="run.recovered").data["lost_owner"]
    assert int(lost.rsplit(":", 1)[1]) in a_pids, (lost, a_pids)  # the hung q2 process's
    ttl = settings.AGENTOPS_LEASE_TTL_S
    print(f"keeper: a hung slot's run recovered {took:.1f}s after its call started")
    # Not before the attempt's hard deadline (timeout 2 s + TTL), counted from when the test
    # saw the tool start (a poll of 20 ms after it did).
    assert took >= 2 + ttl - 0.1, f"recovered {took:.1f}s after the call: before its deadline"

