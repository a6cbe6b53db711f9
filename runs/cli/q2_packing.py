"""Packing: a host's q2 worker processes take ticks in order, the next only when those before
it are busy.

q2's worker processes all wait on one task queue, so ticks (and the runs they start) spread
evenly over them. A worker process whose runs wait on their models most of the time then
sits idle between two steps, and a step that starts after an idle gap costs far more CPU than
one that follows another (caches and branch predictors gone cold; on this machine kind's
virtual CPUs, 2.0 ms a model step for one run at a time against 1.4 ms with 40 in flight,
bench/results.md). Packed, the first process takes every tick while it has CPU to spare
(``AGENTOPS_PACK_CPU`` of one core over the last second) and a free run slot; the second
takes ticks only while no process before it does, and so on. Under a light load one process
does the work, busy enough to stay warm; under a heavy one every process takes ticks, as
before.

Each worker process says, while it waits in ``get`` with room for more, that it is ready
(``offer``): a deadline ``_READY_S`` ahead in a shared array, renewed at every poll. So a
process that was killed, paused (SIGSTOP) or is busy elsewhere stops counting as ready within
``_READY_S``, and the processes after it take ticks again: packing never holds a tick back
from a process that can take it for longer than that. When the host stops, every process
takes ticks, so each gets q2's STOP.
"""
from __future__ import annotations

import multiprocessing
import queue
import time
from collections import deque
from typing import Any

from django.conf import settings

from runs import slots

POLL_S = 0.05  # how often a waiting process looks again (a gated one, or for a task)
_READY_S = 0.25  # a ready mark not renewed within this is void (a dead or paused process)
_WINDOW_S = 1.0  # the CPU share is measured over about this long


class Packing:
    """The shared marks of one host's worker processes (made before they are forked)."""

    def __init__(self, processes: int, ctx: Any = multiprocessing) -> None:
        self.ready = ctx.Array("d", processes, lock=False)  # monotonic deadline, 0: not ready
        self.stopping = ctx.Value("b", 0, lock=False)

    def offer(self, index: int, ready: bool) -> None:
        """Mark process ``index`` ready for ticks (for the next ``_READY_S``) or not."""
        self.ready[index] = time.monotonic() + _READY_S if ready else 0.0

    def may_take(self, index: int) -> bool:
        """Return True when process ``index`` takes ticks now: no process before it is ready,
        or the host is stopping."""
        if self.stopping.value:
            return True
        now = time.monotonic()
        return not any(self.ready[j] > now for j in range(index))


class CpuShare:
    """This process's CPU over the last ``_WINDOW_S`` (all its threads), as a share of a core."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, float]] = deque()

    def read(self) -> float:
        now, cpu = time.monotonic(), time.process_time()
        samples = self._samples
        samples.append((now, cpu))
        while len(samples) > 2 and now - samples[1][0] >= _WINDOW_S:
            samples.popleft()
        then, cpu_then = samples[0]
        return (cpu - cpu_then) / (now - then) if now - then >= POLL_S else 0.0


class PackedTasks:
    """q2's task queue as process ``index`` of a packed host reads it (q2 calls ``get``)."""

    def __init__(self, tasks: Any, packing: Packing, index: int) -> None:
        self._tasks, self._packing, self._index = tasks, packing, index
        self._cpu: CpuShare | None = None  # made in the worker process, on its first get

    def get(self) -> Any:
        """Return the next task once this process may take one (see the module's docstring)."""
        if self._cpu is None:
            self._cpu = CpuShare()
        packing, index = self._packing, self._index
        while True:
            if not packing.may_take(index):
                packing.offer(index, False)
                time.sleep(POLL_S)
                continue
            share = self._cpu.read()
            packing.offer(index, share < settings.AGENTOPS_PACK_CPU and slots.room())
            try:
                # The mark stays while the task is handed to a slot: the processes after
                # this one go on waiting, unless that takes longer than _READY_S.
                return self._tasks.get(timeout=POLL_S)
            except queue.Empty:
                continue

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tasks, name)
