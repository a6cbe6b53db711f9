"""Leases: renew a worker's hold on a run while a long tool call runs, and notice losing it.

The claim itself is runs.engine.runtime.transition.run_claim; every engine write carries the version
it last saw. Renewal only pushes ``lease_expires_at`` forward and does not bump the version,
so the worker's next commit still matches. A lost lease (the run was cancelled, or a sweeper
re-queued it and another worker took it) makes renewal return False and sets the tools'
cancellation tokens, so a long tool can stop early; its result is recorded as late.
"""
from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import Q

from agentops import clock
from agentops.tools import CancelToken
from runs.live import live_flush
from runs.models import Run
from runs.slots import db_release, on_slot
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
    # A whole tick on a run slot: renewed by owner alone (its commits bump the version
    # meanwhile); a call's hold (lease_kept) also matches the version it started with.
    whole_tick: bool = False
    retry: bool = False  # skipped this round (its row was being committed): renew soon


class _Keeper:
    """One daemon thread per process renewing the leases of model and tool calls that run long.

    Registering a call costs a dict insert; only calls still running after a third of the
    TTL ever touch the database. Every run due within half an interval is renewed by the
    same UPDATE, so a process with hundreds of runs in flight (runs.slots) renews them all
    with about one statement per interval, not one per run.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, _Held] = {}
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._slow_s = 0.5

    def add(self, held: _Held) -> int:
        with self._lock:
            key = id(held)
            self._held[key] = held
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="lease-keeper",
                                                daemon=True)
                self._thread.start()
        return key

    def remove(self, key: int) -> None:
        with self._lock:
            self._held.pop(key, None)

    def _loop(self) -> None:
        close_old_connections()
        while True:
            self._wake.wait(0.2)
            now = clock.monotonic()
            with self._lock:
                if not any(h.due <= now for h in self._held.values()):
                    continue
                batch = {k: h for k, h in self._held.items() if h.due - h.interval / 2 <= now}
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
                        held.due = now + (0.2 if held.retry else held.interval)
                        held.retry = False
            for held in batch.values():
                if id(held) in lost:
                    for token in held.tokens:
                        token.cancel()


def leases_renew(held: list[_Held], *, ttl_s: float | None = None) -> set[int]:
    """Renew every lease in ``held`` (one UPDATE per chunk of runs); return the ids of those lost."""
    ttl = settings.AGENTOPS_LEASE_TTL_S if ttl_s is None else ttl_s
    lost: set[int] = set()
    ticks = [h for h in held if h.whole_tick]
    calls = [h for h in held if not h.whole_tick]
    for i in range(0, len(ticks), _TICK_CHUNK):
        lost |= _renew_ticks(ticks[i:i + _TICK_CHUNK], ttl)
    for i in range(0, len(calls), _RENEW_CHUNK):
        lost |= _renew_chunk(calls[i:i + _RENEW_CHUNK], ttl)
    return lost


_RENEW_CHUNK = 100  # SQLite caps an expression's depth at 1000
_TICK_CHUNK = 500  # one id list: SQLite allows 32766 parameters


def _renew_ticks(held: list[_Held], ttl: float) -> set[int]:
    """Renew whole-tick holds by run id and owner (not version): one UPDATE per owner.

    A row locked right now is being committed by its slot: it is skipped (PostgreSQL's
    SKIP LOCKED, so the keeper never queues behind busy slots) and retried soon, not lost.
    """
    until = clock.now() + dt.timedelta(seconds=ttl)
    lost: set[int] = set()
    for owner in {h.owner for h in held}:
        mine = [h for h in held if h.owner == owner]
        ids = list({h.run.pk for h in mine})
        renewed = _renew_ids(ids, owner, until)
        held_still: set = set()
        if len(renewed) != len(ids):
            held_still = set(Run.objects.filter(
                pk__in=[pk for pk in ids if pk not in renewed], lease_owner=owner,
                status=RunStatus.RUNNING).values_list("pk", flat=True))
        for h in mine:
            if h.run.pk in renewed:
                h.run.lease_expires_at = until
            elif h.run.pk in held_still:
                h.retry = True
            else:
                lost.add(id(h))
    return lost


_RENEW_SKIP_LOCKED = (
    "UPDATE runs_run SET lease_expires_at = %s WHERE id IN (SELECT id FROM runs_run "
    "WHERE id = ANY(%s) AND lease_owner = %s AND status = %s FOR UPDATE SKIP LOCKED) "
    "RETURNING id")


def _renew_ids(ids: list, owner: str, until: dt.datetime) -> set:
    """Push the leases of ``ids`` still held by ``owner`` to ``until``; return those renewed."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute(_RENEW_SKIP_LOCKED, [until, ids, owner, RunStatus.RUNNING.value])
            return {row[0] for row in cur.fetchall()}
    kept = Run.objects.filter(pk__in=ids, lease_owner=owner, status=RunStatus.RUNNING)
    pks = set(kept.values_list("pk", flat=True))
    kept.update(lease_expires_at=until)
    return pks


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


@contextmanager
def lease_kept(run: Run, owner: str, tokens: Sequence[CancelToken],
               *, every_s: float | None = None) -> Iterator[Callable[[], bool]]:
    """Renew the lease in the background while the block runs (long model and tool calls).

    The first renewal happens after ``every_s`` (a third of the TTL), so short calls never
    touch the database from a second thread. The calling thread's database connection goes
    back to the pool first (runs.slots.db_release): nobody holds one while waiting.
    """
    live_flush(run.pk)  # the page hears the units coalesced so far before this slow call
    beat = heartbeat_for(run, owner, tokens)
    interval = every_s if every_s is not None else settings.AGENTOPS_LEASE_TTL_S / 3
    # On a run slot the whole tick is kept (lease_ticked): only tool tokens need this hold.
    key = _KEEPER.add(_Held(run=run, owner=owner, tokens=tokens, interval=interval,
                            due=clock.monotonic() + interval)) if tokens or not on_slot() else 0
    db_release()
    try:
        yield beat
    finally:
        try:
            # Take a connection back while the keeper still renews: on a busy host the wait
            # for one from the pool can outlast what is left of the lease.
            connection.ensure_connection()
        finally:
            _KEEPER.remove(key)


@contextmanager
def lease_ticked(run: Run, owner: str) -> Iterator[None]:
    """Keep the lease of a run slot's whole tick renewed by the process's one keeper thread.

    On a saturated host a slot thread can wait seconds between two commits (for the GIL,
    for a pooled connection); its lease must not expire because the worker is busy. The
    keeper renews every run a slot holds in one UPDATE per interval, matching the run id,
    the owner and status running, so the fence is unchanged: a run recovered or claimed by
    another worker, or cancelled, no longer matches, and the slot's next commit (version
    checked) raises LeaseLost. A paused process pauses its keeper too, so its leases expire.
    Off a run slot (in-process ticks, SQLite's one run at a time) this does nothing.
    """
    if not on_slot():
        yield
        return
    interval = settings.AGENTOPS_LEASE_TTL_S / 3
    key = _KEEPER.add(_Held(run=run, owner=owner, tokens=(), interval=interval,
                            due=clock.monotonic() + interval, whole_tick=True))
    try:
        yield
    finally:
        _KEEPER.remove(key)
