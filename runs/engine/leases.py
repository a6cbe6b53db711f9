"""Leases: renew a worker's hold on a run while a long tool call runs, and notice losing it.

The claim itself is runs.engine.transition.run_claim; every engine write carries the version
it last saw. Renewal only pushes ``lease_expires_at`` forward and does not bump the version,
so the worker's next commit still matches. A lost lease (the run was cancelled, or a sweeper
re-queued it and another worker took it) makes renewal return False and sets the tools'
cancellation tokens, so a long tool can stop early; its result is recorded as late.
"""
from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from django.conf import settings
from django.db import close_old_connections, connection

from agentops import clock
from agentops.tools import CancelToken
from runs.live import live_flush
from runs.models import Run
from runs.statuses import RunStatus


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


class _Keeper:
    """One daemon thread per process renewing the leases of tool calls that run long.

    Registering a call costs a dict insert; only calls still running after a third of the
    TTL ever touch the database from the keeper, so short tool calls cost nothing extra.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._due: dict[int, tuple[float, float, Callable[[], bool]]] = {}
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()

    def add(self, beat: Callable[[], bool], interval: float) -> int:
        with self._lock:
            key = id(beat)
            self._due[key] = (clock.monotonic() + interval, interval, beat)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="lease-keeper",
                                                daemon=True)
                self._thread.start()
        return key

    def remove(self, key: int) -> None:
        with self._lock:
            self._due.pop(key, None)

    def _loop(self) -> None:
        close_old_connections()
        while True:
            self._wake.wait(0.2)
            now = clock.monotonic()
            with self._lock:
                ready = [(k, v) for k, v in self._due.items() if v[0] <= now]
            for key, (_, interval, beat) in ready:
                alive = beat()
                with self._lock:
                    if key in self._due:
                        if alive:
                            self._due[key] = (now + interval, interval, beat)
                        else:
                            del self._due[key]


_KEEPER = _Keeper()


@contextmanager
def lease_kept(run: Run, owner: str, tokens: Sequence[CancelToken],
               *, every_s: float | None = None) -> Iterator[Callable[[], bool]]:
    """Renew the lease in the background while the block runs (long tool calls).

    The first renewal happens after ``every_s`` (a third of the TTL), so short tool calls
    never touch the database from a second thread.
    """
    live_flush(run.pk)  # the page hears the units coalesced so far before this slow call
    beat = heartbeat_for(run, owner, tokens)
    interval = every_s if every_s is not None else settings.AGENTOPS_LEASE_TTL_S / 3
    key = _KEEPER.add(beat, interval)
    try:
        yield beat
    finally:
        _KEEPER.remove(key)
