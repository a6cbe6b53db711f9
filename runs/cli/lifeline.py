"""Tie the worker's q2 processes to their parent: they die when it dies, even by SIGKILL.

q2 forks a sentinel, which forks the worker processes (runs.cli.q2_host). If the
``agentops worker`` process is killed outright (SIGKILL, the OOM killer) nothing tells them:
they would go on ticking runs as orphans, with no sweeper beside them and nobody to stop
them. On Linux each forked child asks the kernel for SIGKILL when its parent dies
(``prctl(PR_SET_PDEATHSIG)``); elsewhere a thread in the child watches its parent's pid.
"""
from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
import time

log = logging.getLogger("agentops.worker")
_PR_SET_PDEATHSIG = 1
_WATCH_S = 0.5
_installed = False


def die_with_parent_install() -> None:
    """Make every process forked from here on (and their own children) die with its parent."""
    global _installed
    if _installed:
        return
    _installed = True
    os.register_at_fork(before=_remember_parent, after_in_child=_child_tie)


_parent_pid = [0]


def _remember_parent() -> None:
    _parent_pid[0] = os.getpid()


def _child_tie() -> None:
    # Runs in every child forked by Python code (multiprocessing, os.fork); the hook is
    # inherited, so the sentinel's own children are tied to the sentinel in turn.
    parent = _parent_pid[0]
    if not _pdeathsig_set():
        threading.Thread(target=_watch, args=(parent,), name="agentops-parent-watch",
                         daemon=True).start()
    # The parent may have died between the fork and the prctl: the signal would never come.
    if os.getppid() != parent:
        os._exit(1)


def _pdeathsig_set() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_WATCH_S)
    log.error("the worker process %d died; this process (%d) stops with it", parent, os.getpid())
    os._exit(1)
