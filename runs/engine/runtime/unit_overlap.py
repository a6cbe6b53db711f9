"""A progress unit's statement sent without waiting: the worker works on while PostgreSQL commits.

A run's units follow one another: unit N+1 is computed from the state unit N leaves, which
the worker already holds in memory. Waiting for unit N's commit (its WAL flush, a round trip)
before computing unit N+1 leaves the worker idle for as long as the commit takes. Here a
progress unit (no status change, no fence) is sent and left in flight; its result is read at
the next point that needs it:

- the next unit (``settled`` first): units go out one at a time, in order (the next one is
  built and its parameters dumped meanwhile, ``unit_dumped``: no I/O, nothing sent);
- any other use of the connection: psycopg takes the connection's lock for every query,
  transaction change and commit, and ``_SettlingLock`` reads the result first;
- before the connection goes back to the pool (runs.slots.db_release), before a coalesced
  live update is published, and when a tick ends (runs.engine.runtime.loop).

Nothing is lost by going on: unit N+1 carries ``version = N + 1`` in its WHERE, so when unit
N did not commit, unit N+1 and every later one write nothing either. The worker learns it at
the next unit (``UnitNotCommitted``, a LeaseLost) and stops, as it would have one unit
earlier. What happened in between is what a worker may do before its unit is durable: compute
and call its model (the reply is recorded by that next unit), and run read tools (no side
effect, by their declaration). A side effect is opened only by a fenced unit, which is never
sent this way, and which reads every earlier result first.

Prepared once per connection under our own name (psycopg's prepared statements are its own);
parameters go as text and PostgreSQL types them from the statement, as psycopg's own
unknown-typed text parameters are.
"""
from __future__ import annotations

import select
import weakref
from functools import cache
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg import pq
from psycopg.adapt import PyFormat, Transformer

from agentops.control import LeaseLost


class UnitNotCommitted(LeaseLost):
    """A unit sent without waiting did not commit: stop, as for any lost write."""


@dataclass
class _Pending:
    on_row: Callable[[list[bytes | None]], None]
    what: str
    sql: str
    values: list[Any]
    then: list[Callable[[], None]] = field(default_factory=list)  # once it committed
    named: bool = True  # prepared once under our name; False: unnamed (a pooler in front)


@dataclass
class _State:
    names: dict[str, bytes] = field(default_factory=dict)  # statement -> prepared name
    pending: _Pending | None = None
    dumper: Any = None  # psycopg's Transformer for the connection (made once)
    failed: str = ""  # why the last unit sent this way did not commit (until checked)
    then: list[Callable[[], None]] = field(default_factory=list)  # of units read, not yet called


_states: weakref.WeakKeyDictionary[Any, _State] = weakref.WeakKeyDictionary()
_SQLSTATE = pq.DiagnosticField.SQLSTATE
_NO_SUCH_STATEMENT = b"26000"  # invalid_sql_statement_name: no prepared statement of that name


class _SettlingLock:
    """psycopg's connection lock, reading a unit still in flight before anything else runs."""

    def __init__(self, raw: Any, lock: Any) -> None:
        self._raw, self._lock = weakref.ref(raw), lock

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = self._lock.acquire(blocking, timeout)
        if got:
            raw = self._raw()
            try:
                if raw is not None:
                    _read_pending(raw)
            except BaseException:
                self._lock.release()
                raise
        return got

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def unit_send(raw: Any, sql: str, params: Sequence[Any], what: str,
              on_row: Callable[[list[bytes | None]], None], *, named: bool = True,
              dumped: list[Any] | None = None) -> None:
    """Send the statement ``sql`` (``%s`` placeholders) and return before its result.

    ``on_row`` gets the result's one row (text values) when it is read and the unit's run
    row was updated (its first column is 1). The caller has checked ``settled`` before.
    ``named=False`` (behind a transaction pooler): parsed each time, nothing kept on the
    server connection, which the next statement may not get. ``dumped``: ``params`` as
    ``unit_dumped`` made them (before the unit in flight was read).
    """
    state = _state_for(raw)
    with raw.lock:
        values = dumped if dumped is not None else unit_dumped(raw, params)
        pending = _Pending(on_row, what, sql, values, named=named)
        _send(raw.pgconn, state, pending)
        state.pending = pending


def unit_dumped(raw: Any, params: Sequence[Any]) -> list[Any]:
    """Return ``params`` as ``unit_send`` sends them (text): no I/O, so it may run while a
    unit is still in flight on ``raw``."""
    state = _state_for(raw)
    if state.dumper is None:
        state.dumper = Transformer.from_context(raw)
    return state.dumper.dump_sequence(params, [PyFormat.TEXT] * len(params))


def _state_for(raw: Any) -> _State:
    state = _states.get(raw)
    if state is None:
        state = _states[raw] = _State()
        raw.lock = _SettlingLock(raw, raw.lock)
    return state


def _send(pg: Any, state: _State, pending: _Pending) -> None:
    if not pending.named:
        pg.send_query_params(_numbered(pending.sql).encode(), pending.values)
        _flush(pg)
        return
    name = state.names.get(pending.sql)
    if name is None:
        name = f"agentops_unit_{len(state.names)}".encode()
        pg.send_prepare(name, _numbered(pending.sql).encode())
        _flush(pg)
        for res in _results(pg):
            if res.status != pq.ExecStatus.COMMAND_OK:
                raise UnitNotCommitted(f"{pending.what}: preparing its statement failed: "
                                       f"{_message(res)}")
        state.names[pending.sql] = name
    pg.send_query_prepared(name, pending.values)
    _flush(pg)


def settled(raw: Any | None, *, quiet: bool = False) -> None:
    """Read the unit in flight on ``raw`` (if any); raise UnitNotCommitted if one did not commit.

    ``quiet``: forget a failure instead (a tick already failing for another reason must not
    hand it to the next tick on this connection).
    """
    state = _state_of(raw)
    if state is None:
        return
    if state.pending is not None:
        with raw.lock:  # reads it
            pass
    _tell(state)
    if state.failed:
        why, state.failed = state.failed, ""
        if not quiet:
            raise UnitNotCommitted(why)


def after_commit(raw: Any | None, fn: Callable[[], None]) -> None:
    """Call ``fn`` once the unit in flight on ``raw`` is read and committed (now if none is).

    What tells of a unit (its metrics, "step done" log lines) waits for its commit: a unit
    that did not commit is never counted nor logged as done. A unit read by another use of
    the connection (under psycopg's lock, where ``fn`` may not query) is told at the next
    ``settled``: the next unit, a release to the pool, or the tick's end.
    """
    state = _state_of(raw)
    if state is not None and state.pending is not None:
        state.pending.then.append(fn)
        return
    if state is not None:
        _tell(state)  # units read meanwhile come first
    fn()


def _state_of(raw: Any | None) -> _State | None:
    return _states.get(raw) if raw is not None else None


def _tell(state: _State) -> None:
    """Call what waited for the units read so far (outside the connection's lock)."""
    while state.then:
        state.then.pop(0)()


def _read_pending(raw: Any) -> None:
    state = _states.get(raw)
    pending = state.pending if state is not None else None
    if pending is None:
        return
    state.pending = None
    try:
        results = _results(raw.pgconn)
        res = results[0] if results else None
        if res is not None and res.error_field(_SQLSTATE) == _NO_SUCH_STATEMENT:
            # psycopg deallocates every prepared statement after a ROLLBACK (or a DROP) it
            # ran: ours went too. Nothing ran (it failed at bind): prepare and send it again.
            state.names.clear()
            _send(raw.pgconn, state, pending)
            results = _results(raw.pgconn)
            res = results[0] if results else None
    except UnitNotCommitted as exc:  # preparing it again failed: nothing ran
        state.failed = str(exc)
        return
    except Exception as exc:  # noqa: BLE001 - the connection broke: the unit's fate is unknown
        state.failed = f"{pending.what}: its result was lost ({exc}); the next unit finds out"
        return
    if res is None or res.status != pq.ExecStatus.TUPLES_OK:
        state.failed = f"{pending.what} did not commit: {_message(res)}"
        return
    row = [res.get_value(0, i) for i in range(res.nfields)]
    if row[0] != b"1":
        state.failed = f"{pending.what}: the run changed since (version check failed)"
        return
    pending.on_row(row)
    state.then.extend(pending.then)  # called by ``settled``, outside the connection's lock


def _results(pg: Any) -> list[Any]:
    """Wait (GIL released) for the statement in flight; return its results."""
    out = []
    while True:
        pg.consume_input()
        while pg.is_busy():
            select.select([pg.socket], [], [])
            pg.consume_input()
        res = pg.get_result()
        if res is None:
            return out
        out.append(res)


def _flush(pg: Any) -> None:
    while pg.flush():
        select.select([pg.socket], [pg.socket], [])
        pg.consume_input()


def _message(res: Any) -> str:
    if res is None:
        return "no result"
    return (res.error_message or b"").decode(errors="replace").strip() or str(res.status)


@cache
def _numbered(sql: str) -> str:
    """Return ``sql`` with its ``%s`` placeholders as ``$1``, ``$2``, ... (libpq's own)."""
    parts = sql.split("%s")
    return "".join(p + (f"${i + 1}" if i < len(parts) - 1 else "") for i, p in enumerate(parts))
