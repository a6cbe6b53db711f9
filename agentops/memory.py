"""How much memory this process may use, and how big a value is once serialized as JSON.

The memory budget (AGENTOPS_MEMORY_SHARE) weighs a run's working set against the process's
limit: the smallest of the cgroup's ``memory.max`` (v2) or ``memory.limit_in_bytes`` (v1),
the address-space rlimit (RLIMIT_AS) and the machine's total memory, unless
AGENTOPS_MEMORY_LIMIT_BYTES names it. Sizes are what the value takes serialized (what the
state, the event log and the context hold of it), counted without building the text.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import resource
from collections.abc import Callable
from typing import Any

_CGROUP_FILES = (("/sys/fs/cgroup/memory.max", "cgroup memory.max"),
                 ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "cgroup memory.limit_in_bytes"))
_UNLIMITED = 1 << 60  # cgroup v1 writes a huge number for "no limit"


@dataclasses.dataclass(frozen=True)
class Allowance:
    """How many more bytes a run may hold in memory, and the sentence saying why that many.

    The sentence is written when read (a result past the allowance), not each time a tool
    call is given an allowance: that happens on every call, the explaining rarely.
    """

    bytes: int
    reason: Callable[[], str]

    @property
    def why(self) -> str:
        """Return the sentence saying why the run may hold that many bytes."""
        return self.reason()

    def split(self, parts: int) -> Allowance:
        """Return the allowance of one of ``parts`` calls sharing this one."""
        return Allowance(self.bytes // max(parts, 1),
                         lambda: f"{self.why}; shared by {parts} calls")


def process_limit(configured: int = 0) -> tuple[int, str]:
    """Return (the bytes this process may use, where that figure came from)."""
    if configured > 0:
        return configured, "AGENTOPS_MEMORY_LIMIT_BYTES"
    return _detected()


@functools.cache
def _detected() -> tuple[int, str]:
    found: list[tuple[int, str]] = []
    for path, name in _CGROUP_FILES:
        value = _read_int(path)
        if value and value < _UNLIMITED:
            found.append((value, name))
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft not in (resource.RLIM_INFINITY, -1) and soft > 0:
        found.append((soft, "RLIMIT_AS"))
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    found.append((total, "the machine's total memory"))
    return min(found)


def _read_int(path: str) -> int:
    try:
        with open(path) as fh:
            text = fh.read().strip()
    except OSError:
        return 0
    return int(text) if text.isdigit() else 0


def json_size(value: Any, *, stop_at: int | None = None) -> int:
    """Return about how many characters ``value`` takes as JSON (strings by their length).

    With ``stop_at`` the count stops once it passes that many: enough to know a value is too
    big without walking all of it.
    """
    size, stack = 0, [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            size += len(v) + 2
        elif isinstance(v, (bytes, bytearray)):
            size += len(v)
        elif isinstance(v, dict):
            size += 2 + 4 * len(v)
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            size += 2 + len(v)
            stack.extend(v)
        else:
            size += 8  # a number, true/false or null
        if stop_at is not None and size > stop_at:
            return size
    return size
