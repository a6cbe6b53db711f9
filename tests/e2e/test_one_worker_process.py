"""One q2 worker process of a host killed or paused: the host's other processes go on.

A real ``agentops worker`` host on PostgreSQL with three q2 worker processes, idle. Its idle
processes all wait for the next tick on one queue. With q2's own queue, one of them waits
inside the read holding the queue's reader lock (a semaphore) and the others wait on the lock.
SIGKILL that one (what the OOM killer does to one process) and the lock is never given back:
the processes q2 starts in its place wait on it too, and the host takes no tick again. SIGSTOP
it and the host takes none until it is continued (runs/cli/q2_queue.py).

Here the victim is the process waiting inside the read when there is one (q2's own queue),
any worker process otherwise. Runs started after the blow must all succeed while the killed
process is being replaced, and while the paused one is still stopped.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.e2e.workers import Worker, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
WORKERS = 3


def _ppid(pid: int) -> int:
    """Return the parent of ``pid`` (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])


def _worker_processes(host: Worker) -> list[int]:
    """Return the host's q2 worker processes: the children of its sentinel."""
    pids = host.pids()
    sentinels = {p for p in pids if _ppid(p) == host.proc.pid}
    return sorted(p for p in pids if _ppid(p) in sentinels)


def _victim(host: Worker) -> int:
    """Return the worker process waiting inside the task queue's read, else the first one."""
    workers = _worker_processes(host)
    for pid in workers:
        if "pipe_read" in Path(f"/proc/{pid}/wchan").read_text(errors="replace"):
            return pid
    return workers[0]


def _all_succeed(goal: str, n: int, within_s: float) -> None:
    from runs.models import Run
    from runs.services import run_start

    ids = [run_start(agent="chaos_read", goal=f"{goal} {i}", input={}).pk for i in range(n)]
    wait_until(lambda: set(Run.objects.filter(pk__in=ids).values_list("status", flat=True))
               == {"succeeded"}, within_s, f"{n} runs started after the {goal} to succeed")


def _idle(host: Worker) -> None:
    wait_until(lambda: "worker up" in host.log_path.read_text(errors="replace")
               and len(_worker_processes(host)) == WORKERS, 30,
               f"{WORKERS} idle worker processes")


def test_a_killed_or_paused_worker_process_does_not_stop_the_others(chaos_world, tmp_path):
    host = Worker("one", tmp_path, AGENTOPS_WORKERS=str(WORKERS))
    host.start()
    try:
        _idle(host)
        _all_succeed("warm-up", 3, 60)
        victim = _victim(host)
        os.kill(victim, signal.SIGKILL)
        _all_succeed("kill", 6, 45)
        _idle(host)  # q2 replaced the killed process
        victim = _victim(host)
        os.kill(victim, signal.SIGSTOP)
        try:
            _all_succeed("pause", 6, 45)
        finally:
            os.kill(victim, signal.SIGCONT)
        _all_succeed("continue", 6, 45)
    finally:
        host.kill()


def test_a_host_whose_sentinel_is_killed_exits_1_with_its_processes(chaos_world, tmp_path):
    """SIGKILL q2's sentinel alone: its worker processes die with it, and the host's main
    process stops and exits 1 (not 0), so a supervisor restarting failures starts it again."""
    host = Worker("sentinel", tmp_path, AGENTOPS_WORKERS=str(WORKERS))
    host.start()
    try:
        _idle(host)
        sentinels = [p for p in host.pids() if _ppid(p) == host.proc.pid]
        assert len(sentinels) == 1
        os.kill(sentinels[0], signal.SIGKILL)
        assert host.proc.wait(timeout=40) == 1
        wait_until(lambda: not host.pids(), 10, "the host's processes to be gone")
        assert "q2's sentinel" in host.log_path.read_text(errors="replace")
    finally:
        host.kill()
