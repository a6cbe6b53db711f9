"""The seam through which the engine reads time, makes ids and draws randomness.

Engine code never calls datetime.now(), uuid4() or random directly, so tests can freeze and
replay them (STYLE rule 10).
"""
from __future__ import annotations

import datetime as dt
import random
import secrets
import time
import uuid
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
    """Return a new id like ``tc_0192f3a1b2c4e5d6...`` (prefix + 24 hex chars), time-ordered.

    The first 12 hex digits are the wall clock in milliseconds, the other 12 random: ids made
    later sort later, so a unique index on them appends at its right edge instead of touching
    a random leaf page per insert (each a full-page image in the WAL after a checkpoint).
    """
    return f"{prefix}_{time.time_ns() // 1_000_000:012x}{secrets.token_hex(6)}"


def new_uuid() -> uuid.UUID:
    """Return a time-ordered UUID (the UUIDv7 layout: 48-bit milliseconds, then random bits).

    Primary keys made with it append to their B-trees, like ``new_id`` (the column type is
    unchanged, and rows made with ``uuid4`` before stay valid).
    """
    value = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(secrets.token_bytes(10), "big")
    value = value & ~(0xF << 76) | 0x7 << 76  # version 7
    value = value & ~(0x3 << 62) | 0x2 << 62  # RFC 4122 variant
    return uuid.UUID(int=value)


def rng() -> random.Random:
    """Return the engine's random source (jitter)."""
    return _rng

