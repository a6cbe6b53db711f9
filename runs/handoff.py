"""The hand-off: a worker host's recoverer wakes its own q2 processes to start recovered runs.

A recovered run is queued (urgent) with a q2 tick, and a q2 process with free run slots
takes it from there (runs.tasks). Through q2 a dead or paused worker's dozens of runs
queue one fetch behind the other; here the recoverer, which lives in the worker host's
main process, wakes the host's q2 worker processes as soon as it has committed a few
recovered runs, and each reserves some for its free slots (runs.tasks ``_recovered_take``:
their urgent mark cleared in one statement, so no other process starts them too) and
starts them at once. Their q2 ticks stay queued: a process that dies before claiming a run
leaves it to that tick, and a tick that comes later finds the run claimed (one
conditional UPDATE matching nothing). The recoverers of all live hosts recover a lost
worker's runs in parallel, so each host's processes take their share.

The wake is a semaphore the host creates before q2 forks (``handoff_install``): its worker
processes inherit it. Nothing is held across processes: a process killed while waiting
takes no lock with it, and the recoverer never blocks on it. Without a host (``qcluster``
run by hand, tests) nothing is installed, and q2's ticks start recovered runs as before.
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import threading
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, connection

log = logging.getLogger("agentops.handoff")
_IDLE_WAIT_S = 30.0  # a watcher wakes this often anyway: nothing to do unless woken
_state: dict[str, Any] = {"wake": None, "processes": 0, "watcher_pid": 0}
_lock = threading.Lock()


def handoff_install(*, processes: int) -> None:
    """Create this host's wake before q2 forks its ``processes`` worker processes."""
    _state["wake"] = multiprocessing.get_context("fork").Semaphore(0)
    _state["processes"] = max(1, processes)


def handoff_announce() -> None:
    """Wake this host's q2 processes: recovered runs wait for a slot (a few at once).

    One wake per process at most is outstanding, so wakes nobody takes never pile up.
    """
    wake = _state["wake"]
    if wake is None:
        return
    try:
        for _ in range(_state["processes"] - wake.get_value()):
            wake.release()
    except (OSError, ValueError, NotImplementedError):  # never lets recovery fail
        log.warning("could not wake this host's q2 processes", exc_info=True)


def handoff_watch(take: Callable[[], object]) -> None:
    """In a q2 worker process, start (once) the thread that calls ``take`` when woken."""
    wake = _state["wake"]
    if wake is None or _state["watcher_pid"] == os.getpid():
        return
    with _lock:
        if _state["watcher_pid"] == os.getpid():
            return
        _state["watcher_pid"] = os.getpid()
    threading.Thread(target=_watch, args=(wake, take), name="agentops-handoff",
                     daemon=True).start()


def _watch(wake: Any, take: Callable[[], object]) -> None:
    """Call ``take`` each time the host's recoverer wakes this process (forever)."""
    while True:
        if not wake.acquire(timeout=_IDLE_WAIT_S):
            continue
        try:
            take()
        except DatabaseError:
            log.exception("starting recovered runs failed: their q2 ticks start them")
        except Exception:  # noqa: BLE001 - the watcher must outlive any one bad take
            log.exception("starting recovered runs failed unexpectedly")
        finally:
            connection.close()  # back to the pool: the watcher holds nothing between wakes
