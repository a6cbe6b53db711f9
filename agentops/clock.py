"""The seam through which the engine reads time, makes ids and draws randomness.

Engine code never calls datetime.now(), uuid4() or random directly, so tests can freeze and
replay them (STYLE rule 10).
"""
from __future__ import annotations

import datetime as dt
import functools
import random
import secrets
import time
from collections.abc import Callable

# A partial, not a lambda: read a dozen times a step, and one Python frame fewer each time.
_now: Callable[[], dt.datetime] = functools.partial(dt.datetime.now, dt.timezone.utc)
_rng = random.Random()


def now() -> dt.datetime:
    """Return the current time (UTC, aware)."""
    return _now()


def monotonic() -> float:
    """Return a monotonic clock reading in seconds, for durations and deadlines in-process."""
    return time.monotonic()


def new_id(prefix: str) -> str:
    """Return a new id like ``tc_0192f3a1b2c4e5d6...`` (prefix + 24 hex chars), time-ordered.

    The first 12 hex digits are the wall clock in milliseconds, the other 12 random: ids made
    later sort later, so a unique index on them appends at its right edge instead of touching
    a random leaf page per insert (each a full-page image in the WAL after a checkpoint).
    """
    return f"{prefix}_{time.time_ns() // 1_000_000:012x}{secrets.token_hex(6)}"


def rng() -> random.Random:
    """Return the engine's random source (jitter)."""
    return _rng

