"""Run slots: many runs in flight in one q2 worker process.

A run spends most of its time waiting for its model or an I/O-bound tool. Each q2 worker
process keeps up to ``AGENTOPS_RUNS_IN_FLIGHT`` runs in flight: the q2 task
(``runs.tasks.tick``) hands its run to a slot thread and returns; while every slot is busy
it blocks, so q2 fetches nothing more for this process (back-pressure) and other hosts take
the queue. One executor per run still holds: a slot works on a run only after claiming its
lease, and every commit checks the version and lease owner as before.

On PostgreSQL the slot threads share a psycopg connection pool (Django's
``OPTIONS["pool"]``, enabled in the worker process itself, after q2 forked it); a thread
hands its connection back (``db_release``) before it waits on a model or a tool, so
hundreds of runs in flight need only the few connections of the runs between two waits.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from runs.engine.runtime import unit_overlap
from runs.engine.runtime.queue import worker_name
from runs.pooler import session_name

log = logging.getLogger("agentops.slots")
_lock = threading.Lock()
_state: dict[str, Any] = {"slots": None, "in_flight": 0, "pooled": False}
_draining = threading.Event()
_released = threading.local()  # .wrapper: the wrapper whose connection db_release handed back
_SLOT_PREFIX = "run-slot:"


def runs_in_flight_limit() -> int:
    """Return how many runs one worker process keeps in flight (AGENTOPS_RUNS_IN_FLIGHT)."""
    return max(1, int(settings.AGENTOPS_RUNS_IN_FLIGHT))


def slot_submit(run_id: str, body: Callable[[str], object]) -> bool:
    """Run ``body(run_id)`` on a slot thread; block while every slot is busy.

    Return False (the caller runs the tick itself) when one run in flight is configured
    or ticks are driven in process (no queue to hand back to).
    """
    limit = runs_in_flight_limit()
    if limit <= 1 or not settings.AGENTOPS_ENQUEUE_TICKS:
        return False
    with _lock:
        if _state["slots"] is None:
            _state["slots"] = threading.BoundedSemaphore(limit)
            pool_enable()
            # Runs at interpreter exit (a stopped or recycled q2 process) before the slot
            # threads are joined: every slot ends its slice at its next unit and re-enqueues.
            threading._register_atexit(_draining.set)  # type: ignore[attr-defined]
        slots = _state["slots"]
    slots.acquire()  # back-pressure: q2 fetches nothing more while this blocks
    with _lock:
        _state["in_flight"] += 1
    # Not a daemon: a stopping or recycled q2 process waits for its runs' slices to end.
    threading.Thread(target=_slot, args=(slots, run_id, body), name=f"{_SLOT_PREFIX}{run_id}",
                     daemon=False).start()
    return True


def _slot(slots: threading.BoundedSemaphore, run_id: str, body: Callable[[str], object]) -> None:
    try:
        body(run_id)
    except Exception:  # the lease expires and the sweeper recovers the run
        log.exception("tick of run %s failed in its slot", run_id)
    finally:
        connection.close()  # back to the pool (or closed): a slot holds nothing between ticks
        with _lock:
            _state["in_flight"] -= 1
        slots.release()


def slots_free() -> bool:
    """Return True when this process runs slots and has one free (and is not stopping).

    A process with a free slot keeps taking ticks from q2, so nothing queued waits on it:
    its runs may go on past their slice and need not yield to recovered runs.
    """
    return (_state["slots"] is not None and not _draining.is_set()
            and _state["in_flight"] < runs_in_flight_limit())


def drain() -> None:
    """Make every slot end its slice at its next unit, as when the process stops."""
    _draining.set()


def draining() -> bool:
    """Return True once this process is stopping: slots end their slices now."""
    return _draining.is_set()


def on_slot() -> bool:
    """Return True when the calling thread is a run slot (its whole tick's lease is kept)."""
    return threading.current_thread().name.startswith(_SLOT_PREFIX)


def in_flight() -> int:
    """Return how many runs this process has in flight on slot threads."""
    return _state["in_flight"]


def pool_enable() -> None:
    """Switch this process's PostgreSQL connections to a psycopg pool (slot threads share it).

    Called in the q2 worker process on its first slotted tick, never before q2 forks, so no
    pool (with its threads and sockets) is ever inherited across a fork.
    """
    db = connection.settings_dict
    if connection.vendor != "postgresql" or settings.AGENTOPS_DB_POOL_MAX <= 0:
        return

    connection.close()
    options = db.setdefault("OPTIONS", {})
    # Named at connect time: no set_config round trip on every checkout (release on death).
    options.setdefault("application_name", session_name())
    options["pool"] = {"min_size": min(2, settings.AGENTOPS_DB_POOL_MAX),
                       "max_size": settings.AGENTOPS_DB_POOL_MAX,
                       "timeout": settings.AGENTOPS_DB_POOL_TIMEOUT_S,
                       "max_idle": settings.AGENTOPS_DB_POOL_IDLE_S,
                       "name": f"agentops-{worker_name()}"}
    db["CONN_MAX_AGE"] = 0  # Django requires it with a pool: close() returns to the pool
    db["CONN_HEALTH_CHECKS"] = False  # the pool discards broken connections on return
    _state["pooled"] = True


def db_release() -> None:
    """Hand this thread's connection back to the pool before a long wait (model, tool).

    Only when pooled and outside a transaction: otherwise the next query would reconnect
    from scratch, or the transaction would be lost. ``db_reacquire`` takes one back.
    """
    if not _state["pooled"]:
        return
    wrapper = connections[DEFAULT_DB_ALIAS]
    if wrapper.connection is not None and not wrapper.in_atomic_block:
        # A unit still in flight is read first: its outcome belongs to this thread's run,
        # and the pool takes back only an idle connection.
        unit_overlap.settled(wrapper.connection)
        wrapper.close()  # Django's own close: psycopg_pool putconn, nothing more
        _released.wrapper = wrapper


def db_reacquire() -> None:
    """Take a connection from the pool again after ``db_release`` (before the lease can end).

    Django's ``connect()`` would rebuild the connection parameters (unused with a pool), set
    autocommit and send ``connection_created`` on every checkout: about three quarters of
    a release/reacquire cycle's CPU. After ``db_release`` (Django connected this thread's
    wrapper, so the signal was sent for it, and no transaction is open) only the pool's
    ``getconn()`` and the resets ``connect()`` makes are needed: a pooled connection was
    configured by the pool when it was opened (``OPTIONS["pool"]`` passes Django's
    configure callback) and its session named at connect time (runs.apps has nothing to
    do). Anything else (no pool, nothing released, ``atomic()``) goes through Django's
    ``ensure_connection()``. Without a pool nothing was released (``db_release``): the
    thread's connection stayed, or Django opens one at its next query.
    """
    if not _state["pooled"]:
        return
    wrapper = connections[DEFAULT_DB_ALIAS]
    released, _released.wrapper = getattr(_released, "wrapper", None), None
    if wrapper.connection is not None:
        return
    if released is not wrapper or wrapper.in_atomic_block \
            or not wrapper.settings_dict["AUTOCOMMIT"]:
        wrapper.ensure_connection()
        return
    _connect_state_reset(wrapper)
    pool = wrapper.pool
    with wrapper.wrap_database_errors:
        if pool.closed:  # replaced since (Django's close_pool): open it as connect() does
            pool.open()
        wrapper.connection = pool.getconn()
        if not wrapper.connection.autocommit:  # handed back inside a transaction
            wrapper.connection.autocommit = True
    wrapper.autocommit = True


def _connect_state_reset(wrapper: Any) -> None:
    """Reset what BaseDatabaseWrapper.connect() resets before it takes a new connection."""
    wrapper.savepoint_ids, wrapper.atomic_blocks, wrapper.run_on_commit = [], [], []
    wrapper.needs_rollback = wrapper.closed_in_transaction = wrapper.errors_occurred = False
    wrapper.health_check_enabled = wrapper.settings_dict["CONN_HEALTH_CHECKS"]
    wrapper.health_check_done = True
    wrapper.close_at = time.monotonic()  # CONN_MAX_AGE is 0 with a pool


def slot_wait_free() -> None:
    """Block until this process has a free run slot, without taking it.

    The q2 task calls this after handing its run to a slot: a process whose slots are all
    busy does not go back to q2's queue for a tick it could not start. That tick would wait
    here, hidden from this host's other processes (and other hosts) that have free slots.
    """
    slots = _state["slots"]
    if slots is None:
        return
    slots.acquire()
    slots.release()
