"""TaskReader (runs/cli/q2_queue.py): forked readers of one bounded task queue, as a host's
q2 worker processes read it; a reader killed or stopped while it waits holds nothing.

Real processes and a real ``multiprocessing.Queue(maxsize=1)`` (q2's ``queue_limit``); the
whole host through ``agentops worker`` is tests/e2e/test_one_worker_process.py.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest

from runs.cli.q2_queue import TaskReader, reader_lock_file

CTX = multiprocessing.get_context("fork")


def _read_all(reader: TaskReader, out: multiprocessing.Queue) -> None:
    for task in iter(reader.get, "STOP"):
        out.put((os.getpid(), task))


@pytest.fixture
def queues():
    tasks, out, lock = CTX.Queue(maxsize=1), CTX.Queue(), reader_lock_file()
    procs: list = []

    def start(n: int) -> list:
        new = [CTX.Process(target=_read_all, args=(TaskReader(tasks, lock), out), daemon=True)
               for _ in range(n)]
        for p in new:
            p.start()
        procs.extend(new)
        return new

    yield tasks, out, start
    for p in procs:
        if p.is_alive():
            os.kill(p.pid, signal.SIGCONT)
            p.kill()
        p.join(5)
    lock.close()


def _take(out: multiprocessing.Queue, n: int) -> list:
    return [out.get(timeout=10) for _ in range(n)]


def test_every_task_is_read_exactly_once_by_three_readers(queues):
    tasks, out, start = queues
    readers = start(3)
    for i in range(300):
        tasks.put({"n": i})  # blocks while the one place is taken: back-pressure kept
    got = _take(out, 300)
    assert sorted(t["n"] for _, t in got) == list(range(300))
    assert {pid for pid, _ in got} <= {p.pid for p in readers}
    for _ in readers:
        tasks.put("STOP")
    for p in readers:
        p.join(10)
        assert p.exitcode == 0


@pytest.mark.parametrize("blow", ["kill", "stop"])
def test_a_reader_killed_or_stopped_while_waiting_holds_nothing(queues, blow):
    tasks, out, start = queues
    first = start(1)[0]
    time.sleep(0.3)  # waiting for a task: with Queue.get it would hold the reader lock now
    os.kill(first.pid, signal.SIGKILL if blow == "kill" else signal.SIGSTOP)
    if blow == "kill":
        first.join(5)
    second = start(1)[0]
    for i in range(20):
        tasks.put(i)
    got = _take(out, 20)
    assert sorted(t for _, t in got) == list(range(20))
    assert {pid for pid, _ in got} == {second.pid}


def test_a_count_given_back_too_often_is_let_be(queues):
    """A reader killed between giving the count back and reading leaves it one too high."""
    tasks, out, start = queues
    tasks.put("a")
    tasks._sem.release()  # what that reader did before it died; "a" is still in the pipe
    tasks.put("b")
    start(1)
    assert sorted(t for _, t in _take(out, 2)) == ["a", "b"]
    tasks.put("c")
    assert _take(out, 1)[0][1] == "c"
