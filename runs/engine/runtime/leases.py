"""Leases: renew a worker's hold on a run while it works on it, and notice losing it.

The claim itself is runs.engine.runtime.transition.run_claim; every engine write carries the version
it last saw. Renewal only pushes ``lease_expires_at`` forward and does not bump the version,
so the worker's next commit still matches. A lost lease (the run was cancelled, or a sweeper
re-queued it and another worker took it) makes renewal fail and sets the tools'
cancellation tokens, so a long tool can stop early; its result is recorded as late.

Who renews, one path per case:

- a run slot on PostgreSQL (runs.slots): the host's lease keeper *process*
  (runs.engine.runtime.keeper, keeper_main) renews the run for the whole tick
  (``lease_ticked``), outside this interpreter's lock, so a busy worker's leases do not
  expire while its threads queue for the GIL; ``lease_kept`` there only registers the
  tools' tokens, cancelled when the keeper process reports the run lost;
- anywhere else (in-process ticks, SQLite, ``--inline``): ``lease_kept`` registers the model
  or tool call with this process's keeper *thread*, which renews it (version checked)
  while the call runs; between calls the tick's own commits renew the lease.
"""
from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import Q

from agentops import clock
from agentops.hot_settings import hot_setting
from agentops.tools import CancelToken
from runs.engine.runtime.keeper import (keeper_call, keeper_done, keeper_hold, keeper_release,
                                        keeper_unwatch, keeper_watch)
from runs.hung_threads import hung_alive, hung_unwatch, hung_watch
from runs.live import live_flush
from runs.engine.runtime.unit_sql import unit_settled
from runs.models import Run, run_id_text
from runs.slots import db_reacquire, db_release, on_slot
from runs.statuses import RunStatus

log = logging.getLogger("agentops.leases")


def lease_renew(run: Run, owner: str, *, ttl_s: float | None = None) -> bool:
    """Push the lease of ``run`` forward; return False when ``owner`` no longer holds it."""
    ttl = settings.AGENTOPS_LEASE_TTL_S if ttl_s is None else ttl_s
    renewed = Run.objects.filter(
        pk=run.pk, version=run.version, lease_owner=owner, status=RunStatus.RUNNING
    ).update(lease_expires_at=clock.now() + dt.timedelta(seconds=ttl))
    if renewed:
        run.lease_expires_at = clock.now() + dt.timedelta(seconds=ttl)
    return bool(renewed)


def heartbeat_for(run: Run, owner: str, tokens: Sequence[CancelToken]) -> Callable[[], bool]:
    """Return a heartbeat a tool may call: renews the lease, cancels ``tokens`` once it is lost."""
    lock = threading.Lock()

    def beat() -> bool:
        with lock:
            try:
                ok = lease_renew(run, owner)
            finally:
                # A tool thread has its own connection; do not leave it open behind the tool.
                if threading.current_thread() is not threading.main_thread():
                    connection.close()
        if not ok:
            for token in tokens:
                token.cancel()
        else:
            hung_alive(run.pk)  # a call that beats is slow, not hung
        return ok

    return beat


@dataclass
class _Held:
    """A run whose lease the keeper renews while its model or tool call runs."""

    run: Run
    owner: str
    tokens: Sequence[CancelToken]
    interval: float
    due: float
    deadline: float | None = None  # monotonic: past it the call is hung, renew no more


_IDLE_EXIT_S = 1.0


class _Keeper:
    """One daemon thread per process renewing the leases of model and tool calls that run long.

    Registering a call costs a dict insert; only calls still running after a third of the
    TTL ever touch the database. Every run due within half an interval is renewed by the
    same UPDATE. Run slots on PostgreSQL do not use it (the keeper process does).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, _Held] = {}
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._slow_s = 0.5
        self._idle_since: float | None = None  # time.monotonic() when the last call left

    def add(self, held: _Held) -> int:
        with self._lock:
            key = id(held)
            self._held[key] = held
            self._idle_since = None  # busy again: the idle time counts from the next quiet
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="lease-keeper",
                                                daemon=True)
                self._thread.start()
        return key

    def remove(self, key: int) -> None:
        with self._lock:
            self._held.pop(key, None)

    def _keeping(self) -> bool:
        """Return False once no call was added for ``_IDLE_EXIT_S``; the next ``add`` starts a
        new keeper. An idle keeper closes its connection at once: it holds no database
        session (a test database could not be dropped under it). It lingers a moment first,
        so a run of short calls (a model turn, then its reads) starts one thread, not one each.
        """
        with self._lock:
            if self._held:
                self._idle_since = None
                return True
            now = time.monotonic()
            if self._idle_since is not None:
                if now - self._idle_since < _IDLE_EXIT_S:
                    return True  # its connection was closed when it went idle
                self._thread = self._idle_since = None
                return False
            self._idle_since = now
        connection.close()
        return True

    def _loop(self) -> None:
        close_old_connections()
        while self._keeping():
            self._wake.wait(0.2)
            now = clock.monotonic()
            with self._lock:
                # A call past its deadline is hung: its lease is left to expire (fencing).
                live = {k: h for k, h in self._held.items()
                        if h.deadline is None or h.deadline > now}
                if not any(h.due <= now for h in live.values()):
                    continue
                batch = {k: h for k, h in live.items() if h.due - h.interval / 2 <= now}
            # The keeper keeps its one connection: waiting in the pool's queue behind hundreds
            # of run slots would let the very leases it keeps expire.
            try:
                lost = leases_renew(list(batch.values()))
            except Exception:  # a broken connection must not end the keeper: retry soon
                log.exception("lease keeper: renewal of %d leases failed", len(batch))
                connection.close()
                continue
            took = clock.monotonic() - now
            if took > self._slow_s:
                log.warning("lease keeper: renewing %d leases took %.2fs", len(batch), took)
            with self._lock:
                for key, held in batch.items():
                    if key not in self._held:
                        continue
                    if id(held) in lost:
                        del self._held[key]
                    else:
                        held.due = now + held.interval
            for held in batch.values():
                if id(held) in lost:
                    for token in held.tokens:
                        token.cancel()


def leases_renew(held: list[_Held], *, ttl_s: float | None = None) -> set[int]:
    """Renew every lease in ``held`` (one UPDATE per chunk of runs); return the ids of those lost."""
    ttl = settings.AGENTOPS_LEASE_TTL_S if ttl_s is None else ttl_s
    lost: set[int] = set()
    for i in range(0, len(held), _RENEW_CHUNK):
        lost |= _renew_chunk(held[i:i + _RENEW_CHUNK], ttl)
    return lost


_RENEW_CHUNK = 100  # SQLite caps an expression's depth at 1000


def _renew_chunk(held: list[_Held], ttl: float) -> set[int]:
    until = clock.now() + dt.timedelta(seconds=ttl)
    match = Q()
    for h in held:
        match |= Q(pk=h.run.pk, version=h.run.version, lease_owner=h.owner)
    renewed = Run.objects.filter(match, status=RunStatus.RUNNING).update(lease_expires_at=until)
    if renewed == len(held):
        for h in held:
            h.run.lease_expires_at = until
        return set()
    # Some were lost (cancelled, recovered elsewhere): find which, one by one (rare).
    return {id(h) for h in held if not lease_renew(h.run, h.owner, ttl_s=ttl)}


_KEEPER = _Keeper()


def _by_keeper_process() -> bool:
    """Return True when this thread's run is kept by the keeper process (a slot on PostgreSQL)."""
    return on_slot() and connection.vendor == "postgresql"


def lease_kept(run: Run, owner: str, tokens: Sequence[CancelToken],
               *, every_s: float | None = None, within_s: float | None = None,
               quick: bool = False) -> _LeaseKept:
    """Keep the lease while the block runs (long model and tool calls); cancel tokens if lost.

    Off a PostgreSQL slot the keeper thread renews it, the first time after ``every_s`` (a
    third of the TTL), so short calls never touch the database from a second thread. On
    one, the keeper process already renews the whole tick: only the tokens are registered.
    The calling thread's database connection goes back to the pool first
    (runs.slots.db_release) and is taken back at the end (db_reacquire): nobody holds one
    while waiting.

    ``within_s``: the calls end within this many seconds (a tool's timeout, or the default
    its author promises). A thread still inside them ``within_s`` + TTL/3 later is hung: its
    lease is no longer renewed, so it expires and the sweeper recovers the run elsewhere,
    never before the attempt's hard deadline (start + timeout + TTL, runs.engine.runtime.
    fencing), as for a stopped worker.

    ``quick``: calls expected to end at once (held reads, read_rides) keep the connection:
    a release and a reacquire would cost more CPU than they do (docs/workers.md).
    """
    return _LeaseKept(run, owner, tokens, every_s, within_s, quick)


class _LeaseKept:
    """``lease_kept``'s block: a class, not a generator context manager, which costs about
    four times the instructions to enter and leave (two model or tool calls every step)."""

    def __init__(self, run: Run, owner: str, tokens: Sequence[CancelToken],
                 every_s: float | None, within_s: float | None, quick: bool) -> None:
        self.run, self.owner, self.tokens = run, owner, tokens
        self.every_s, self.within_s, self.quick = every_s, within_s, quick

    def __enter__(self) -> Callable[[], bool]:
        run, within_s = self.run, self.within_s
        # The page hears the units coalesced so far before this slow call (once they committed).
        live_flush(run_id_text(run), before_send=unit_settled)
        if not self.quick:
            db_release()  # reads a unit still in flight first (raises UnitNotCommitted)
        beat = heartbeat_for(run, self.owner, self.tokens)
        self.process = _by_keeper_process()
        self.key = _kept_start(run, self.owner, self.tokens, process=self.process,
                               every_s=self.every_s, within_s=within_s)
        # A thread still inside past the hard deadline is hung: too many replace the process.
        self.hung_key = hung_watch(run.pk, within_s) if within_s is not None else ""
        return beat

    def __exit__(self, *exc: object) -> None:
        hung_unwatch(self.hung_key)
        try:
            # Take a connection back while the lease is still kept: on a busy host the wait
            # for one from the pool can outlast what is left of the lease.
            db_reacquire()
        finally:
            _kept_end(self.run, self.owner, self.key, process=self.process,
                      within_s=self.within_s)


def _kept_start(run: Run, owner: str, tokens: Sequence[CancelToken], *, process: bool,
                every_s: float | None, within_s: float | None) -> int:
    """Hand the call to the keeper process or thread; return its key for ``_kept_end``."""
    grace = hot_setting("AGENTOPS_LEASE_TTL_S") / 3
    interval = every_s if every_s is not None else grace
    if process:
        key = keeper_watch(run.pk, tokens) if tokens else 0
        if within_s is not None:
            keeper_call(run.pk, owner, time.time() + within_s + grace)  # the keeper's clock
        return key
    return _KEEPER.add(_Held(
        run=run, owner=owner, tokens=tokens, interval=interval,
        due=clock.monotonic() + interval,
        deadline=None if within_s is None else clock.monotonic() + within_s + grace))


def _kept_end(run: Run, owner: str, key: int, *, process: bool, within_s: float | None) -> None:
    """Take the call back from the keeper process or thread ``_kept_start`` handed it to."""
    if process:
        keeper_unwatch(run.pk, key)
        if within_s is not None:
            keeper_done(run.pk, owner)
    else:
        _KEEPER.remove(key)


@contextmanager
def lease_ticked(run_id: Any, owner: str) -> Iterator[None]:
    """Keep the lease of a run slot's whole tick renewed by the worker's keeper process.

    Entered before the claim, so the keeper's first renewal comes a third of the TTL after
    it however long this thread then waits (for the GIL, for a pooled connection); the
    keeper waits for the claim to commit before it counts a miss as lost. It renews by run
    id, owner and status running, so the fence is unchanged: a run recovered or claimed by
    another worker, or cancelled, no longer matches, and the slot's next commit (version
    checked) raises LeaseLost. A stopped worker's keeper renews nothing, so its leases
    expire. Off a PostgreSQL slot (in-process ticks, SQLite) this does nothing.
    """
    if not _by_keeper_process():
        yield
        return
    keeper_hold(run_id, owner)
    try:
        yield
    finally:
        keeper_release(run_id, owner)
