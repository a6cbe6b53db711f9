"""Move the engine's clock in tests: ``agentops.clock`` is the seam (STYLE rule 10)."""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from agentops import clock


@contextmanager
def clock_reads(fn: Callable[[], dt.datetime]) -> Iterator[None]:
    """Run the block with ``clock.now()`` answering ``fn()``; the real clock comes back after."""
    real = clock._now
    clock._now = fn
    try:
        yield
    finally:
        clock._now = real
