"""How a host's q2 worker processes take the next tick: a reader lock the kernel lets go of.

The worker processes of a host take ticks off one ``multiprocessing.Queue`` that the pusher
thread (runs.cli.q2_host) fills. Its ``get`` holds the queue's reader lock, a POSIX semaphore,
for as long as it waits for the next task: of an idle host's processes one waits inside the
read, the others wait on the lock. SIGKILL that one (the OOM killer picking it, say) and the
semaphore is never given back: the process q2 starts in its place waits on it too, and the
host takes no tick again until it is restarted. SIGSTOP it and the host takes none until it
is continued (tests/e2e/test_one_worker_process.py).

Here a worker process waits for the queue's pipe to be readable holding nothing, then takes a
POSIX record lock (``fcntl.lockf``) on a file the host's processes share, which the kernel
releases when its holder dies, and reads a task only if one is still there (another process
may have read it first). The lock is held for the read of one task already in the pipe, a
few microseconds: only a process killed or stopped in that instant still stops the others.
"""
from __future__ import annotations

import fcntl
import tempfile
from multiprocessing.queues import Queue
from multiprocessing.reduction import ForkingPickler
from typing import IO, Any


def reader_lock_file() -> IO[bytes]:
    """Return the file whose lock the worker processes take to read a task: unlinked at
    once, so nothing is left behind; they inherit its descriptor when forked."""
    return tempfile.TemporaryFile(prefix="agentops-q2-reader-")


class TaskReader:
    """The task queue as q2's worker loop reads it (``iter(task_queue.get, "STOP")``)."""

    def __init__(self, queue: Queue, lock: IO[bytes]) -> None:
        self._queue = queue
        self._lock_fd = lock.fileno()

    def get(self) -> Any:
        """Return the next task, waiting for one without holding any lock."""
        reader = self._queue._reader  # type: ignore[attr-defined]
        while True:
            reader.poll(None)
            fcntl.lockf(self._lock_fd, fcntl.LOCK_EX)
            try:
                if not reader.poll(0):
                    continue  # another process read it first
                _give_back(self._queue)
                raw = reader.recv_bytes()
            finally:
                fcntl.lockf(self._lock_fd, fcntl.LOCK_UN)
            return ForkingPickler.loads(raw)


def _give_back(queue: Queue) -> None:
    """Let the pusher put the next task (the queue's bounded count of tasks in it).

    Given back before the read: a process killed between the two leaves the count one too
    high, which the next read finds (ValueError) and lets be; given back after, it would
    leave the count one short for ever, and with q2's ``queue_limit`` of 1 no task put again.
    """
    try:
        queue._sem.release()  # type: ignore[attr-defined]
    except ValueError:
        pass
