"""Hung tool threads: a worker process that gathers too many is replaced by its q2 cluster.

A slot thread stuck inside a tool that never returns (no timeout declared, cancellation
ignored) cannot be stopped from Python. Its run is recovered elsewhere once the call is past
its deadline (``leases.lease_kept``: the lease is left to expire), but the thread stays, and
a process would gather one per hung call until it ran out of slots or memory.

Each call made on a slot is watched here with its hard deadline (the call's bound + lease
TTL: by then its run is, or is being, recovered elsewhere); a tool calling
``ctx.heartbeat()`` moves it on, as it keeps its lease. Once this process holds
``AGENTOPS_HUNG_THREADS_MAX`` threads past theirs it is replaced:

1. it stops claiming: the q2 task hands each new tick back to the queue (``hung_replacing``)
   and the slots' ``draining`` flag is set, so every other run ends its slice at its next
   unit and is re-enqueued for another process (its lease released as usual);
2. once only hung threads are left in flight (or ``AGENTOPS_TICK_SLICE_S`` + lease TTL
   later, whatever is still running is handed over like a stopped worker's), it logs and
   counts ``agentops_worker_replacements_total{reason="hung_threads"}``, then ends q2's
   worker loop: a signal makes the main thread raise ``SystemExit`` wherever it waits (so
   the cluster's task-queue lock it holds while waiting for a task is released: a process
   killed there would leave every later worker of the cluster waiting on it), and once the
   stack has unwound, ``os._exit`` ends the process (the hung threads are not daemons and
   would keep an orderly exit waiting forever);
3. django-q2's sentinel sees its worker process dead and starts a new one
   (``Sentinel.reincarnate``: "reincarnated worker ... after death"); the process's own
   PostgreSQL sessions vanish with it, so the sweeper recovers whatever it still held at
   once (release on death, runs.engine.runtime.recovery).
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

from django.conf import settings

from agentops.observability.metrics import count_worker_replacement
from runs import slots

log = logging.getLogger("agentops.slots")
_CHECK_S = 0.5
_lock = threading.Lock()
_watched: dict[str, tuple[float, float]] = {}  # run id -> (hung past this monotonic time, bound)
_replacing = threading.Event()
_state = {"checker_pid": 0, "guard_pid": 0}
_SIGNAL = signal.SIGUSR1
_EXIT_WAIT_S = 10.0  # for the main thread to unwind before the process is ended anyway


class _Replaced(SystemExit):
    """Raised in the q2 process's main thread to end its worker loop (code 0: no traceback)."""


def hung_guard_install() -> None:
    """Prepare this q2 process's main thread to end its worker loop when it is replaced.

    Called by every q2 task (``runs.tasks.tick``), which runs in that main thread; only the
    first call of a process does anything.
    """
    if _state["guard_pid"] == os.getpid() \
            or threading.current_thread() is not threading.main_thread():
        return
    _state["guard_pid"] = os.getpid()
    signal.signal(_SIGNAL, _on_signal)
    # Called when the process ends, before the (hung, non-daemon) threads would be joined.
    threading._register_atexit(_exit_now)  # type: ignore[attr-defined]


def _on_signal(*_: object) -> None:
    if _replacing.is_set():
        raise _Replaced(0)


def _exit_now() -> None:
    if _replacing.is_set():
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def hung_watch(run_id: object, within_s: float) -> str:
    """Note that the calling slot thread enters a call of ``run_id`` bounded by ``within_s``.

    Return a key for ``hung_unwatch``. Off a slot thread (a q2 task of a one-run process,
    the in-process engine) nothing is watched: there the q2 task timeout stops the process.
    """
    if not slots.on_slot():
        return ""
    key = str(run_id)
    with _lock:
        _watched[key] = (time.monotonic() + within_s + settings.AGENTOPS_LEASE_TTL_S, within_s)
        if _state["checker_pid"] != os.getpid():
            _state["checker_pid"] = os.getpid()
            threading.Thread(target=_check, name="hung-thread-checker", daemon=True).start()
    return key


def hung_alive(run_id: object) -> None:
    """The call of ``run_id`` showed a sign of life (``ctx.heartbeat()``): not hung yet."""
    with _lock:
        found = _watched.get(str(run_id))
        if found is not None:
            bound = found[1]
            _watched[str(run_id)] = (time.monotonic() + bound + settings.AGENTOPS_LEASE_TTL_S,
                                     bound)


def hung_unwatch(key: str) -> None:
    """The call watched under ``key`` returned (even late: the thread is free again)."""
    if key:
        with _lock:
            _watched.pop(key, None)


def hung_replacing() -> bool:
    """Return True once this process is being replaced: it takes no new run."""
    return _replacing.is_set()


def hung_count() -> int:
    """Return how many watched threads of this process are past their hard deadline."""
    now = time.monotonic()
    with _lock:
        return sum(1 for until, _ in _watched.values() if until <= now)


def _check() -> None:
    limit = int(settings.AGENTOPS_HUNG_THREADS_MAX)
    while limit > 0:
        time.sleep(_CHECK_S)
        hung = hung_count()
        if hung >= limit:
            _replace(hung, limit)
            return


def _replace(hung: int, limit: int) -> None:
    """Stop claiming, let the other runs end their slices, then exit to be replaced."""
    pid = os.getpid()
    log.warning("worker process %s holds %d hung tool threads (limit %d, "
                "AGENTOPS_HUNG_THREADS_MAX): it takes no new runs, hands its other runs "
                "over and exits; its q2 cluster starts a new process", pid, hung, limit)
    _replacing.set()
    slots.drain()
    give_up = time.monotonic() + settings.AGENTOPS_TICK_SLICE_S + settings.AGENTOPS_LEASE_TTL_S
    while slots.in_flight() > hung_count() and time.monotonic() < give_up:
        time.sleep(0.1)
    left = slots.in_flight() - hung_count()
    log.warning("worker process %s exits now to be replaced (hung threads: %d, other runs "
                "still in flight: %d)", pid, hung_count(), max(left, 0))
    count_worker_replacement("hung_threads")
    if _state["guard_pid"] == pid:
        os.kill(pid, _SIGNAL)  # the main thread unwinds, then _exit_now ends the process
        time.sleep(_EXIT_WAIT_S)
    _exit_now()
