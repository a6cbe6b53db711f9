"""A progress unit's statement sent without waiting: the worker works on while PostgreSQL commits.

A run's units follow one another: unit N+1 is computed from the state unit N leaves, which
the worker already holds in memory. Waiting for unit N's commit (its WAL flush, a round trip)
before computing unit N+1 leaves the worker idle for as long as the commit takes. Here a
progress unit (no status change, no fence) is sent and left in flight; its result is read at
the next point that needs it:

- a later unit: at most ``AGENTOPS_UNITS_IN_FLIGHT`` (2) are in flight on a connection, in
  order, in libpq's pipeline mode, each its own transaction (a Sync after each); a unit goes
  out once the oldest beyond that bound is read (``settled(keep=)``). It is built and its
  parameters dumped before that read (``unit_dumped``: no I/O, nothing sent);
- any other use of the connection: psycopg takes the connection's lock for every query,
  transaction change and commit, and ``_SettlingLock`` reads the result first;
- before the connection goes back to the pool (runs.slots.db_release), before a coalesced
  live update is published, and when a tick ends (runs.engine.runtime.loop).

Nothing is lost by going on: unit N+1 carries ``version = N + 1`` in its WHERE, so when unit
N did not commit, unit N+1 and every later one write nothing either (the first failure is
the one told). The worker learns it when unit N is read, at most two units later
(``UnitNotCommitted``, a LeaseLost), and stops, as it would have earlier. What happened in
between is what a worker may do before its unit is durable: compute
and call its model (the reply is recorded by that next unit), and run read tools (no side
effect, by their declaration). A side effect is opened only by a fenced unit, which is never
sent this way, and which reads every earlier result first.

Prepared once per connection under our own name (psycopg's prepared statements are its own);
parameters go as text and PostgreSQL types them from the statement, as psycopg's own
unknown-typed text parameters are.
"""
from __future__ import annotations

import itertools
import os
import select
import weakref
from collections import deque
from functools import cache
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from psycopg import pq
from psycopg.adapt import PyFormat, Transformer

from agentops.control import LeaseLost
from agentops.hot_settings import hot_setting


class UnitNotCommitted(LeaseLost):
    """A unit sent without waiting did not commit: stop, as for any lost write."""


class UnitLink(NamedTuple):
    """What ties a unit sent without waiting to the one in flight before it.

    ``tag``: this unit's own, left on the session by its run update (a ``set_config``, undone
    with its transaction); ``after``: the tag of the unit still in flight that it follows,
    which it must find on the session, or None (it follows no unit in flight). The version
    check alone does not tie them: a writer that bumped the version under the first unit
    leaves exactly the version the second one expects.
    """

    tag: str
    after: str | None


@dataclass
class _Pending:
    on_row: Callable[[list[bytes | None]], None]
    what: str
    sql: str
    values: list[Any]
    then: list[Callable[[], None]] = field(default_factory=list)  # once it committed
    named: bool = True  # prepared once under our name; False: unnamed (a pooler in front)
    synced: bool = False  # sent in pipeline mode, its own Sync after it
    tag: str | None = None  # UnitLink.tag: what a unit sent behind it must find


@dataclass
class _State:
    names: dict[str, bytes] = field(default_factory=dict)  # statement -> prepared name
    pending: deque[_Pending] = field(default_factory=deque)  # in flight, oldest first
    dumper: Any = None  # psycopg's Transformer for the connection (made once)
    failed: str = ""  # why the last unit sent this way did not commit (until checked)
    then: list[Callable[[], None]] = field(default_factory=list)  # of units read, not yet called


# A connection's _State is kept on the connection itself (this attribute): it lives and goes
# with it, and a unit reads it several times (a plain attribute read, no weak reference made).
_STATE = "_agentops_units"
_SQLSTATE = pq.DiagnosticField.SQLSTATE
_NO_SUCH_STATEMENT = b"26000"  # invalid_sql_statement_name: no prepared statement of that name
_PIPELINE_OFF = pq.PipelineStatus.OFF
_TAG_PREFIX, _tags = os.urandom(6).hex(), itertools.count()  # unique across processes


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
                    _read_pending(raw)  # every unit in flight
            except BaseException:
                self._lock.release()
                raise
        return got

    def release(self) -> None:
        self._lock.release()

    def undrained(self) -> Any:
        """The lock itself: what holds it reads (or sends) units on its own terms."""
        return self._lock

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def unit_send(raw: Any, sql: str, params: Sequence[Any], what: str,
              on_row: Callable[[list[bytes | None]], None], *, named: bool = True,
              dumped: list[Any] | None = None, tag: str | None = None) -> None:
    """Send the statement ``sql`` (``%s`` placeholders) and return before its result.

    ``on_row`` gets the result's one row (text values) when it is read and the unit's run
    row was updated (its first column is 1). The caller has checked ``settled`` before.
    ``named=False`` (behind a transaction pooler): parsed each time, nothing kept on the
    server connection, which the next statement may not get. ``dumped``: ``params`` as
    ``unit_dumped`` made them (before the unit in flight was read).
    """
    state = _state_for(raw)
    with raw.lock.undrained():
        values = dumped if dumped is not None else unit_dumped(raw, params)
        pending = _Pending(on_row, what, sql, values, named=named, tag=tag)
        if named and sql in state.names:
            _send_pipelined(raw, state, pending)
        else:  # a statement to prepare, or unnamed (a pooler): alone on the wire
            _read_pending(raw)
            _send(raw.pgconn, state, pending)
        state.pending.append(pending)


def unit_link(raw: Any | None) -> UnitLink:
    """Return the link of a unit about to be sent on ``raw``: a fresh tag, and the tag of the
    newest unit in flight that it will follow (None when it will follow none)."""
    state = _state_of(raw)
    after = None
    if state is not None and state.pending and in_flight_bound() > 1:
        after = state.pending[-1].tag
    return UnitLink(f"{_TAG_PREFIX}{next(_tags)}", after)


def unit_dumped(raw: Any, params: Sequence[Any]) -> list[Any]:
    """Return ``params`` as ``unit_send`` sends them (text): no I/O, so it may run while a
    unit is still in flight on ``raw``."""
    state = _state_for(raw)
    if state.dumper is None:
        state.dumper = Transformer.from_context(raw)
    return state.dumper.dump_sequence(params, [PyFormat.TEXT] * len(params))


def _state_for(raw: Any) -> _State:
    state = getattr(raw, _STATE, None)
    if state is None:
        state = _State()
        setattr(raw, _STATE, state)
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


def _send_pipelined(raw: Any, state: _State, pending: _Pending) -> None:
    """Send a prepared unit in pipeline mode with its own Sync (its own transaction), so the
    next one may follow it before its result is read."""
    pg = raw.pgconn
    if pg.pipeline_status == _PIPELINE_OFF:
        _read_pending(raw)  # one sent on its own: libpq enters pipeline mode only when idle
        pg.enter_pipeline_mode()
    pending.synced = True
    pg.send_query_prepared(state.names[pending.sql], pending.values)
    pg.pipeline_sync()
    _flush(pg)


def in_flight_bound() -> int:
    """Return how many units may be in flight on one connection (at least 1)."""
    return hot_setting("AGENTOPS_UNITS_IN_FLIGHT")


def settled(raw: Any | None, *, quiet: bool = False, keep: int = 0) -> None:
    """Read the units in flight on ``raw`` (if any) but the last ``keep``; raise
    UnitNotCommitted if one did not commit.

    ``quiet``: forget a failure instead (a tick already failing for another reason must not
    hand it to the next tick on this connection).
    """
    state = _state_of(raw)
    if state is None:
        return
    if len(state.pending) > keep:
        with raw.lock.undrained():
            _read_pending(raw, keep)
    if state.failed and state.pending:  # the units behind it cannot commit either: read them
        with raw.lock.undrained():
            _read_pending(raw)
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
    if state is not None and state.pending:
        state.pending[-1].then.append(fn)
        return
    if state is not None:
        _tell(state)  # units read meanwhile come first
    fn()


def _state_of(raw: Any | None) -> _State | None:
    return getattr(raw, _STATE, None)  # None for None too


def _tell(state: _State) -> None:
    """Call what waited for the units read so far (outside the connection's lock)."""
    while state.then:
        state.then.pop(0)()


def _read_pending(raw: Any, keep: int = 0) -> None:
    """Read the units in flight on ``raw``, oldest first, but the last ``keep``."""
    state = getattr(raw, _STATE, None)
    if state is None:
        return
    pg = raw.pgconn
    while len(state.pending) > keep:
        pending = state.pending.popleft()
        try:
            res = _result(pg, pending)
            if res is not None and res.error_field(_SQLSTATE) == _NO_SUCH_STATEMENT:
                _sent_again(pg, state, [pending, *state.pending])
                state.pending.clear()
                break
        except Exception as exc:  # noqa: BLE001 - the connection broke: their fate is unknown
            _fail(state, f"{pending.what}: its result was lost ({exc}); the next unit finds out")
            state.pending.clear()
            break
        _told(state, pending, res)
    if not state.pending and pg.pipeline_status != _PIPELINE_OFF:
        _pipeline_off(pg)


def _sent_again(pg: Any, state: _State, units: list[_Pending]) -> None:
    """Prepare and send ``units`` again, one at a time, in order.

    psycopg deallocates every prepared statement after a ROLLBACK (or a DROP) it ran: ours
    went too. The first unit failed at bind (nothing ran); each later one in flight failed at
    bind too or, following a unit that did not run, at its version check: none wrote anything.
    """
    later = [_result(pg, u) for u in units[1:]]  # read them all: the pipeline must be empty
    _pipeline_off(pg)
    state.names.clear()
    for unit, res in zip(units, [None, *later]):
        if res is not None and _committed(res):
            _told(state, unit, res)  # not seen: a later unit of a run follows the one before
            continue
        unit.synced = False  # on its own now
        try:
            _send(pg, state, unit)
        except UnitNotCommitted as exc:  # preparing it again failed: nothing ran
            _fail(state, str(exc))
            return
        _told(state, unit, _result(pg, unit))


def _result(pg: Any, pending: _Pending) -> Any:
    """Wait for ``pending``'s result (and, in pipeline mode, its Sync); return it, or None."""
    results = _results(pg)
    if pending.synced:
        _ready(pg)
        pg.get_result()  # its PIPELINE_SYNC
    return results[0] if results else None


def _committed(res: Any) -> bool:
    return res.status == pq.ExecStatus.TUPLES_OK and res.get_value(0, 0) == b"1"


def _told(state: _State, pending: _Pending, res: Any) -> None:
    """Hand a unit's row to its caller, or keep why it did not commit (the first such)."""
    if res is None or res.status != pq.ExecStatus.TUPLES_OK:
        _fail(state, f"{pending.what} did not commit: {_message(res)}")
        return
    row = [res.get_value(0, i) for i in range(res.nfields)]
    if row[0] != b"1":
        _fail(state, f"{pending.what}: the run changed since (version check failed)")
        return
    pending.on_row(row)
    state.then.extend(pending.then)  # called by ``settled``, outside the connection's lock


def _fail(state: _State, why: str) -> None:
    """Keep the first failure: the units after a unit that did not commit fail for it."""
    state.failed = state.failed or why


def _pipeline_off(pg: Any) -> None:
    try:
        pg.exit_pipeline_mode()
    except Exception:  # noqa: BLE001 - a broken connection: psycopg finds out on its next use
        pass


def _results(pg: Any) -> list[Any]:
    """Wait (GIL released) for the statement in flight; return its results."""
    out = []
    while True:
        _ready(pg)
        res = pg.get_result()
        if res is None:
            return out
        out.append(res)


def _ready(pg: Any) -> None:
    """Wait (GIL released) until libpq holds the next result whole."""
    pg.consume_input()
    while pg.is_busy():
        select.select([pg.socket], [], [])
        pg.consume_input()


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
