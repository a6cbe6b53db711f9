"""The seam through which the engine reads time, makes ids and draws randomness.

Engine code never calls datetime.now(), uuid4() or random directly, so tests can freeze and
replay them (STYLE rule 10).
"""
from __future__ import annotations

import datetime as dt
import random
import secrets
import time
from collections.abc import Callable

_now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc)  # noqa: E731
_rng = random.Random()


def now() -> dt.datetime:
    """Return the current time (UTC, aware)."""
    return _now()


def monotonic() -> float:
    """Return a monotonic clock reading in seconds, for durations and deadlines in-process."""
    return time.monotonic()


def new_id(prefix: str) -> str:
    """Return a new random id like ``tc_3f9a...`` (prefix + 24 hex chars)."""
    return f"{prefix}_{secrets.token_hex(12)}"


def rng() -> random.Random:
    """Return the engine's random source (jitter)."""
    return _rng

