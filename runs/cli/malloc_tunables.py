"""glibc's per-thread malloc cache turned off for a worker host (docs/workers.md "Memory").

glibc gives every thread a cache of the blocks it freed (the tcache: up to 7 blocks of each
of 64 sizes up to 1 KiB), reused only by that thread. A q2 worker process keeps each run in
flight on a slot thread of its own (runs.slots), hundreds of them, and a slot waiting on its
model keeps its cache full all that time: the blocks it freed during its last step are lost
to every other thread. With the cache off, freed blocks go back to the shared arena at once.
Measured with bench/density.py (N = 500, L = 1 s, four passes each): 0.174–0.176 MB of host
RSS per run in flight against 0.202–0.212 on main, CPU per step within the noise
(bench/results.md).

Tunables are read only when a program starts, so ``agentops worker`` executes itself again,
once, at its start, with ``glibc.malloc.tcache_count=0`` added to ``GLIBC_TUNABLES``; the q2
processes it forks and the lease keepers it starts inherit it. A ``GLIBC_TUNABLES`` that
already names a tcache tunable is the operator's choice and is kept as it is (and so is one
naming ``tcache_count`` on the second start, which ends the loop). Another C library (musl)
has no such cache: nothing is done.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping

TCACHE_OFF = "glibc.malloc.tcache_count=0"


def tcache_off_env(env: Mapping[str, str]) -> dict[str, str] | None:
    """Return ``env`` with glibc's per-thread cache off, or None when there is nothing to
    change (a tcache tunable set already, by the operator or by a start before)."""
    tunables = env.get("GLIBC_TUNABLES", "")
    if "glibc.malloc.tcache" in tunables:
        return None
    return {**env, "GLIBC_TUNABLES": ":".join(filter(None, (tunables, TCACHE_OFF)))}


def tcache_off_exec() -> None:
    """Execute this program again (same interpreter, options and arguments, same pid) with
    glibc's per-thread cache off; return without doing anything when it is off already or
    the C library is not glibc."""
    if not _glibc():
        return
    env = tcache_off_env(os.environ)
    if env is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, list(sys.orig_argv), env)


def _glibc() -> bool:
    """Tell whether this process runs on glibc."""
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (ValueError, OSError):  # no such name: not glibc
        return False
