"""The worker side of the lease keeper process (runs.engine.runtime.keeper_main).

A q2 worker process running slots on PostgreSQL keeps the leases of its runs alive from a
child process, not from a thread: with hundreds of slot threads on a loaded host a keeper
thread waits seconds for the GIL and the leases it keeps expire under a live worker. The
child is started lazily, on the first slotted tick (so after q2 forked this process, never
inherited across a fork), with the DSN of Django's connection settings, the lease TTL and
this process's pid. This module writes ``hold``/``release`` lines (and ``call``/``done`` for
a tool call past its deadline: a hung slot) to its stdin; a reader thread reads the ``lost``
lines it prints and cancels the tool tokens watching that run, so
a long tool of a run recovered elsewhere stops early. The slot itself learns of the loss
at its next commit (version and owner checked: LeaseLost), as before.

The child exits when this process dies (its stdin closes; it also polls the pid), pauses
while this process is stopped, and is started again (holds replayed) if it ever died.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.db import connection
from psycopg.conninfo import make_conninfo

from agentops.tools import CancelToken

log = logging.getLogger("agentops.leases")
_ROOT = Path(__file__).resolve().parents[3]
_CHECK_S = 0.5  # how often calls are checked against their deadlines
# Django-only keys of connection params: not libpq settings.
_NOT_LIBPQ = {"context", "cursor_factory", "prepare_threshold", "client_encoding"}


class _Child:
    """The keeper process of this worker process, the runs it holds and who watches them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._pid = 0  # the worker pid the child was started for (a fork needs its own)
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
        """Write one line to the child (starting it first); called under the lock."""
        for _ in range(2):
            if self._proc is None or self._proc.poll() is not None or self._pid != os.getpid():
                self._start()
            try:
                stdin: IO[str] = self._proc.stdin  # type: ignore[union-attr,assignment]
                stdin.write(line)
                stdin.flush()
                return
            except (BrokenPipeError, OSError, ValueError):
                log.warning("lease keeper process %s is gone: starting another",
                            getattr(self._proc, "pid", None))
                self._proc = None

    def _start(self) -> None:
        env = {**os.environ, "AGENTOPS_KEEPER_DSN": keeper_dsn()}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "runs.engine.runtime.keeper_main",
             "--ttl", str(settings.AGENTOPS_LEASE_TTL_S), "--worker-pid", str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True, bufsize=1,
            cwd=_ROOT)  # `-m` imports from its working directory: this checkout
        self._pid = os.getpid()
        # A restarted child renews what the last one did (this line is then sent again too).
        for run_id, (owner, _) in self._holds.items():
            self._proc.stdin.write(f"hold {run_id} {owner}\n")  # type: ignore[union-attr]
        threading.Thread(target=self._read, args=(self._proc,), name="lease-keeper-reader",
                         daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            verb, _, run_id = line.strip().partition(" ")
            if verb != "lost":
                continue
            with self._lock:
                self._holds.pop(run_id, None)
                watching = list(self._watchers.get(run_id, {}).values())
            log.warning("lease of run %s lost: it is no longer this worker's", run_id)
            for tokens in watching:
                for token in tokens:
                    token.cancel()


def keeper_dsn() -> str:
    """Return a libpq connection string for the database Django's default connection uses."""
    params: dict[str, Any] = {k: v for k, v in connection.get_connection_params().items()
                              if k not in _NOT_LIBPQ and v is not None}
    # Not the worker's name: release on death (runs.engine.runtime.recovery) must see the
    # worker's own sessions vanish with it.
    params["application_name"] = f"agentops-lease-keeper-{os.getpid()}"
    return make_conninfo(**{k: str(v) for k, v in params.items()})


_CHILD = _Child()


def keeper_hold(run_id: Any, owner: str) -> None:
    """Have the keeper process renew ``run_id``'s lease for ``owner`` (nested holds count)."""
    _CHILD.hold(str(run_id), owner)


def keeper_release(run_id: Any, owner: str) -> None:
    """Undo one ``keeper_hold``; the last one stops the renewals."""
    _CHILD.release(str(run_id), owner)


def keeper_call(run_id: Any, owner: str, deadline: float) -> None:
    """Note that a call of ``run_id`` is under way until ``deadline`` (Unix time). Past it
    the slot is hung: a checker thread tells the keeper, which renews that lease no more
    (keeper_main). Nothing is written to the keeper for a call that ends in time."""
    _CHILD.call(str(run_id), owner, deadline)


def keeper_done(run_id: Any, owner: str) -> None:
    """The call of ``run_id`` returned (a late one: the keeper renews it again)."""
    _CHILD.done(str(run_id), owner)


def keeper_watch(run_id: Any, tokens: Sequence[CancelToken]) -> int:
    """Cancel ``tokens`` if the keeper finds ``run_id``'s lease lost; return a key to unwatch."""
    return _CHILD.watch(str(run_id), tokens)


def keeper_unwatch(run_id: Any, key: int) -> None:
    """Stop cancelling the tokens registered under ``key``."""
    _CHILD.unwatch(str(run_id), key)
