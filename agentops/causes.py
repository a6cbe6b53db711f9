"""Why an event happened: the cause every event records in ``Event.caused_by``.

A cause is text, ``kind:value``:

- ``seq:12``: the event of the same run at seq 12 led to this one (the engine's default: an
  event follows from the one before it, in its batch or in the run's log);
- a root, where a chain ends: ``start:<who>`` (the run was started), ``action:<token>`` (an
  operator or support action: its Intervention row carries the token as ``data.cause``),
  ``recovery:<lost worker>`` (the sweeper took the run back from a dead worker),
  ``signal:<name>`` (something outside sent the run a signal).

Callers never pass causes down by hand: whoever starts a chain opens ``event_cause(...)``
around its work and ``runs.engine.runtime.events.event_append`` stamps the first event of
each batch written inside it (later events of the batch follow from the one before). Code that
appends new kinds of events gets causes without knowing about them.
"""
from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

SEQ = "seq"
START = "start"
ACTION = "action"
RECOVERY = "recovery"
SIGNAL = "signal"
ROOTS = (START, ACTION, RECOVERY, SIGNAL)
MAX_LENGTH = 80

_current: contextvars.ContextVar[str] = contextvars.ContextVar("agentops_cause", default="")


@contextmanager
def event_cause(cause: str) -> Iterator[str]:
    """Stamp ``cause`` on the first event of every batch appended inside this block."""
    token = _current.set(cause[:MAX_LENGTH])
    try:
        yield cause
    finally:
        _current.reset(token)


def cause_open() -> str:
    """Return the cause an ``event_cause`` block holds open here ("" outside one)."""
    return _current.get()


def causes_for(n: int, first_seq: int, given: list[str]) -> list[str]:
    """Return the causes of ``n`` events numbered from ``first_seq`` (``given`` may set some).

    The first one takes the open cause, else follows from the run's previous event (or is
    the start when it is the run's first); each later one follows from the one before it.
    """
    scope = _current.get()
    out = []
    for i in range(n):
        cause = given[i] if i < len(given) else ""
        if not cause:
            prev = first_seq + i - 1
            cause = (scope if i == 0 and scope else
                     f"{SEQ}:{prev}" if prev >= 1 else f"{START}:")
        out.append(cause[:MAX_LENGTH])
    return out


def cause_parse(cause: str) -> tuple[str, str]:
    """Return (kind, value) of a cause; an event stored before causes were kept reads ("", "")."""
    kind, _, value = (cause or "").partition(":")
    return kind, value


def cause_seq(cause: str) -> int | None:
    """Return the seq a ``seq:N`` cause points at, or None for a root."""
    kind, value = cause_parse(cause)
    return int(value) if kind == SEQ and value.isdigit() else None
