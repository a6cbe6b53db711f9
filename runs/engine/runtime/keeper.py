"""The worker side of the lease keeper process (runs.engine.runtime.keeper_main).

A q2 worker process running slots on PostgreSQL keeps the leases of its runs alive from a
separate process, not from a thread: with hundreds of slot threads on a loaded host a keeper
thread waits seconds for the GIL and the leases it keeps expire under a live worker. One
keeper serves all q2 processes of a worker host (one per database, lease TTL, user and
process group: ``keeper_address``), reached over an abstract Unix socket. The first process
to need it starts it, lazily on its first slotted tick (so after q2 forked this process);
the others connect to it. This module writes ``hold``/``release`` lines (and ``call``/``done``
for a tool call past its deadline: a hung slot) to it; a reader thread reads the ``lost``
lines it sends back (only about this process's runs) and cancels the tool tokens watching
that run, so a long tool of a run recovered elsewhere stops early. The slot itself learns
of the loss at its next commit (version and owner checked: LeaseLost), as before.

The keeper renews nothing of this process while it is stopped and drops its holds the
moment it dies (its socket closes), while it keeps renewing the other processes' runs. If
the keeper itself dies, the reader thread starts another (holds replayed).
"""
from __future__ import annotations

import hashlib
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from psycopg.conninfo import make_conninfo

from agentops.tools import CancelToken

log = logging.getLogger("agentops.leases")
_ROOT = Path(__file__).resolve().parents[3]
_CHECK_S = 0.5  # how often calls are checked against their deadlines
_START_TRIES = 5  # connect, else start the keeper and connect again (it may exit as we come)
# Django-only keys of connection params: not libpq settings.
_NOT_LIBPQ = {"context", "cursor_factory", "prepare_threshold", "client_encoding"}


class _Link:
    """This process's connection to the host's keeper, the runs it holds and who watches them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._pid = 0  # the process that connected (a fork connects again)
        self._holds: dict[str, tuple[str, int]] = {}  # run id -> (owner, nesting)
        self._watchers: dict[str, dict[int, Sequence[CancelToken]]] = {}
        self._calls: dict[str, tuple[str, float, bool]] = {}  # run -> (owner, deadline, told)
        self._checker: threading.Thread | None = None
        self._checker_pid = 0

    def hold(self, run_id: str, owner: str) -> None:
        with self._lock:
            _, depth = self._holds.get(run_id, (owner, 0))
            self._holds[run_id] = (owner, depth + 1)
            if depth == 0:
                self._send(f"hold {run_id} {owner}\n")

    def release(self, run_id: str, owner: str) -> None:
        with self._lock:
            _, depth = self._holds.get(run_id, (owner, 0))
            if depth > 1:
                self._holds[run_id] = (owner, depth - 1)
                return
            if self._holds.pop(run_id, None) is not None:
                self._send(f"release {run_id} {owner}\n")

    def call(self, run_id: str, owner: str, deadline: float) -> None:
        """Note a call under way (no message: the keeper hears of it only once it is late)."""
        with self._lock:
            if run_id not in self._holds:
                return
            self._calls[run_id] = (owner, deadline, False)
            if self._checker is None or not self._checker.is_alive() \
                    or self._checker_pid != os.getpid():
                self._checker_pid = os.getpid()
                self._checker = threading.Thread(target=self._check, name="lease-call-checker",
                                                 daemon=True)
                self._checker.start()

    def done(self, run_id: str, owner: str) -> None:
        with self._lock:
            _, _, told = self._calls.pop(run_id, (owner, 0.0, False))
            if told and run_id in self._holds:
                self._send(f"done {run_id} {owner}\n")  # back after all: renew again

    def _check(self) -> None:
        """Tell the keeper of calls past their deadline (a hung slot), once each."""
        while True:
            time.sleep(_CHECK_S)
            now = time.time()
            with self._lock:
                for run_id, (owner, deadline, told) in list(self._calls.items()):
                    if not told and deadline <= now and run_id in self._holds:
                        self._send(f"call {run_id} {owner} {deadline:.3f}\n")
                        self._calls[run_id] = (owner, deadline, True)

    def watch(self, run_id: str, tokens: Sequence[CancelToken]) -> int:
        with self._lock:
            self._watchers.setdefault(run_id, {})[id(tokens)] = tokens
        return id(tokens)

    def unwatch(self, run_id: str, key: int) -> None:
        with self._lock:
            watching = self._watchers.get(run_id, {})
            watching.pop(key, None)
            if not watching:
                self._watchers.pop(run_id, None)

    def _send(self, line: str) -> None:
        """Write one line to the host's keeper (connecting first); called under the lock."""
        for _ in range(2):
            if self._sock is None or self._pid != os.getpid():
                self._connect()
            try:
                self._sock.sendall(line.encode())  # type: ignore[union-attr]
                return
            except OSError:
                log.warning("lease keeper connection lost: connecting again")
                self._drop()

    def _connect(self) -> None:
        """Connect to this host's keeper (starting it if none listens) and replay the holds."""
        if self._sock is not None and self._pid != os.getpid():
            self._sock.close()  # the parent's connection, inherited by a fork: left to it
            self._sock = None
        sock = _keeper_socket()
        self._sock, self._pid = sock, os.getpid()
        # A new keeper renews what the last one did (the line being sent is then sent again).
        replay = [f"hold {run_id} {owner}\n" for run_id, (owner, _) in self._holds.items()]
        replay += [f"call {run_id} {owner} {deadline:.3f}\n"
                   for run_id, (owner, deadline, told) in self._calls.items() if told]
        if replay:
            sock.sendall("".join(replay).encode())
        threading.Thread(target=self._read, args=(sock,), name="lease-keeper-reader",
                         daemon=True).start()

    def _drop(self) -> None:
        """Close the connection to the keeper (its reader thread wakes and ends)."""
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()
        self._sock = None

    def _read(self, sock: socket.socket) -> None:
        """Cancel the watchers of runs the keeper reports lost; reconnect if it is gone."""
        pending = b""
        while chunk := _recv(sock):
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                verb, _, run_id = line.decode().strip().partition(" ")
                if verb == "lost":
                    self._lost(run_id)
        with self._lock:
            if self._sock is not sock or self._pid != os.getpid():
                return  # closed by this process: a newer connection took over
            log.warning("lease keeper is gone: starting another, %d holds replayed",
                        len(self._holds))
            self._drop()
            if self._holds:
                try:
                    self._connect()
                except OSError:
                    log.exception("lease keeper: could not start another (next hold retries)")

    def _lost(self, run_id: str) -> None:
        """The keeper no longer finds ``run_id`` leased here: cancel the calls it has running.

        Most often the tick has just ended the run (succeeded, parked, yielded) and not yet
        released its hold: nothing was lost. A real loss is told by the slot itself at its
        next commit (LeaseLost, a warning in runs.engine.runtime.loop); here a warning only
        when calls under way are cancelled.
        """
        with self._lock:
            self._holds.pop(run_id, None)
            watching = list(self._watchers.get(run_id, {}).values())
        calls = sum(len(tokens) for tokens in watching)
        if calls:
            log.warning("lease of run %s lost during %d tool calls: cancelling them",
                        run_id, calls)
        else:
            log.info("run %s is no longer leased to this worker (ended, yielded or taken "
                     "over)", run_id)
        for tokens in watching:
            for token in tokens:
                token.cancel()


def _recv(sock: socket.socket) -> bytes:
    """Return what the keeper sent next (b"" once the connection is closed)."""
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def keeper_address() -> str:
    """Return the name of this host's keeper: one per database, TTL, user and process group
    (the worker host: its q2 processes share it; another host on the machine has its own)."""
    key = "\n".join(["v2", keeper_dsn(), str(settings.AGENTOPS_LEASE_TTL_S), str(os.getuid()),
                     str(os.getpgid(0))])
    return f"agentops-lease-keeper-{hashlib.sha256(key.encode()).hexdigest()[:24]}"


def _keeper_socket() -> socket.socket:
    """Connect to this host's keeper, starting it first if none listens."""
    address = keeper_address()
    for _ in range(_START_TRIES):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect("\0" + address)
            return sock
        except (ConnectionRefusedError, FileNotFoundError):
            sock.close()
        # Returns once the keeper is bound (or another one was: then that one is connected to).
        subprocess.run(
            [sys.executable, "-m", "runs.engine.runtime.keeper_main", "--detach",
             "--ttl", str(settings.AGENTOPS_LEASE_TTL_S), "--address", address,
             "--started-by", str(os.getpid())],
            env={**os.environ, "AGENTOPS_KEEPER_DSN": keeper_dsn()}, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, cwd=_ROOT, timeout=30, check=False)
    raise ConnectionRefusedError(f"no lease keeper listens at {address}")


def keeper_dsn() -> str:
    """Return a libpq connection string for the database Django's default connection uses."""
    params: dict[str, Any] = {k: v for k, v in connection.get_connection_params().items()
                              if k not in _NOT_LIBPQ and v is not None}
    params.pop("application_name", None)  # the keeper names its session itself (keeper_main)
    return make_conninfo(**{k: str(v) for k, v in params.items()})


_LINK = _Link()


def keeper_hold(run_id: Any, owner: str) -> None:
    """Have the keeper process renew ``run_id``'s lease for ``owner`` (nested holds count)."""
    _LINK.hold(str(run_id), owner)


def keeper_release(run_id: Any, owner: str) -> None:
    """Undo one ``keeper_hold``; the last one stops the renewals."""
    _LINK.release(str(run_id), owner)


def keeper_call(run_id: Any, owner: str, deadline: float) -> None:
    """Note that a call of ``run_id`` is under way until ``deadline`` (Unix time). Past it
    the slot is hung: a checker thread tells the keeper, which renews that lease no more
    (keeper_main). Nothing is written to the keeper for a call that ends in time."""
    _LINK.call(str(run_id), owner, deadline)


def keeper_done(run_id: Any, owner: str) -> None:
    """The call of ``run_id`` returned (a late one: the keeper renews it again)."""
    _LINK.done(str(run_id), owner)


def keeper_watch(run_id: Any, tokens: Sequence[CancelToken]) -> int:
    """Cancel ``tokens`` if the keeper finds ``run_id``'s lease lost; return a key to unwatch."""
    return _LINK.watch(str(run_id), tokens)


def keeper_unwatch(run_id: Any, key: int) -> None:
    """Stop cancelling the tokens registered under ``key``."""
    _LINK.unwatch(str(run_id), key)
