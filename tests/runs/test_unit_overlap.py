"""A progress unit goes out without waiting for its commit; whoever comes next reads it.

Outside a transaction (a worker's autocommit connection) a lease holder's progress unit is
sent and left in flight (runs.engine.runtime.unit_overlap). These tests hold it in flight on
purpose and check each way it is read: a later unit (at most AGENTOPS_UNITS_IN_FLIGHT are
unread, in libpq's pipeline mode), any other query, a release to the pool and a tick's end;
and that a unit which did not commit stops the worker with nothing more written, the version
check and a database error alike, with one unit in flight and with two.
"""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.models import F

from agentops.control import LeaseLost
from agentops.redaction import EMPTY
from ledger.models import ToolAttempt, ToolCall
from ledger.services.record import attempts_insert, toolcalls_insert
from runs import slots
from runs.engine.runtime import telemetry, unit_overlap, unit_sql
from runs.engine.runtime.events import NewEvent, event_append
from runs.engine.runtime.loop import run_tick
from runs.engine.runtime.unit_overlap import UnitNotCommitted
from runs.models import Event, Run
from runs.services import run_start

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _call(run, n, key=None):
    return ToolCall(tool_call_id=f"tc_overlap{n}", run=run, step_key="s", turn=n, tool="lookup",
                    args={"n": n}, args_hash="h", idempotency_key=key or f"overlap{n}",
                    status="succeeded", attempts=1)


def _unit(run, note: str, *, calls=(), overlap=True):
    return event_append(run=run, expected_version=run.version, events=[
        NewEvent("run.note", {"note": note})], fields={"tool_calls": len(calls)},
        also=[toolcalls_insert(list(calls))] if calls else [], secrets=EMPTY, overlap=overlap)


@pytest.fixture
def run(db, monkeypatch):
    """A run with one unit written (its live message sent): the next ones coalesce, so no
    live message reads them before the test does."""
    from runs import live
    from tests.factories import make_run

    monkeypatch.setattr(live, "COALESCE_S", 3600.0)
    run = make_run()
    _unit(run, "opening", overlap=False)
    return run


@pytest.fixture(params=[1, 2], ids=["one-in-flight", "two-in-flight"])
def bound(request, settings) -> int:
    """AGENTOPS_UNITS_IN_FLIGHT: how many units may be unread on the connection."""
    from runs.pooler import pooled

    settings.AGENTOPS_UNITS_IN_FLIGHT = request.param
    return 1 if pooled() else request.param  # behind a pooler units go one at a time


def _not_behind_a_pooler() -> None:
    from runs.pooler import pooled

    if pooled():
        pytest.skip("behind a transaction pooler units go one at a time (``bound`` tests it)")


def _in_flight(raw=None) -> bool:
    """Return whether the last unit on ``raw`` (this thread's connection) is unread: what waits
    for its commit has not run yet."""
    told: list[bool] = []
    unit_overlap.after_commit(raw or connection.connection, lambda: told.append(True))
    return not told


def test_a_progress_unit_returns_in_flight_and_the_next_query_reads_it(run) -> None:
    calls = [_call(run, 1), _call(run, 2)]
    _unit(run, "first", calls=calls)
    assert _in_flight(), "the unit waited for its commit"
    assert calls[0].pk is None  # its new ids come with its result
    # Any query on the connection reads the unit first, and sees what it wrote.
    notes = list(Event.objects.filter(run=run, type="run.note").values_list("data", flat=True))
    assert notes == [{"note": "opening"}, {"note": "first"}]
    assert not _in_flight()
    stored = dict(ToolCall.objects.filter(run=run).values_list("tool_call_id", "pk"))
    assert {c.tool_call_id: c.pk for c in calls} == stored
    assert Run.objects.get(pk=run.pk).version == run.version


def test_units_go_out_in_order_each_after_the_one_before(run) -> None:
    for i in range(5):
        _unit(run, f"n{i}")
        assert _in_flight()
    assert [d["note"] for d in Event.objects.filter(run=run, type="run.note")
            .order_by("seq").values_list("data", flat=True)][1:] == [f"n{i}" for i in range(5)]
    fresh = Run.objects.get(pk=run.pk)
    assert (fresh.version, fresh.last_seq) == (run.version, run.last_seq)


def test_two_units_are_in_flight_at_once_and_a_third_reads_the_oldest(run, settings) -> None:
    _not_behind_a_pooler()
    settings.AGENTOPS_UNITS_IN_FLIGHT = 2
    raw, told = connection.connection, []
    for turn, note in enumerate(("first", "second")):
        _unit(run, note, calls=[_call(run, turn)])
        unit_overlap.after_commit(raw, lambda note=note: told.append(note))
    assert told == [], "a unit was read before a third went out"
    _unit(run, "third")
    assert told == ["first"]  # the oldest, read before the third went out; the second unread
    assert _in_flight()
    notes = [d["note"] for d in Event.objects.filter(run=run, type="run.note").order_by("seq")
             .values_list("data", flat=True)]
    assert notes == ["opening", "first", "second", "third"]
    unit_sql.unit_settled()  # what waited for a unit read by another query is told here
    assert told == ["first", "second"]
    assert sorted(ToolCall.objects.filter(run=run).values_list("turn", flat=True)) == [0, 1]
    fresh = Run.objects.get(pk=run.pk)  # psycopg's own queries work after the pipeline
    assert (fresh.version, fresh.last_seq) == (run.version, run.last_seq)


def test_a_unit_that_lost_its_version_check_is_told_when_read_and_nothing_more_is_written(
        run, bound) -> None:
    seq = Run.objects.get(pk=run.pk).last_seq
    Run.objects.filter(pk=run.pk).update(version=F("version") + 1)  # an operator wrote meanwhile
    _unit(run, "lost")  # sent: the worker cannot know yet
    for i in range(bound - 1):
        _unit(run, f"behind it {i}")  # sent behind it, unread: still nothing known
    with pytest.raises(UnitNotCommitted, match="version check failed") as lost:
        _unit(run, "after")
    assert isinstance(lost.value, LeaseLost)  # the worker stops as for any lost write
    assert not _in_flight(), "units behind the one that failed were left unread"
    assert Event.objects.filter(run=run, type="run.note").count() == 1  # the opening one
    assert Run.objects.get(pk=run.pk).last_seq == seq
    unit_sql.unit_settled()  # told once: nothing left for the next unit


def test_a_unit_the_database_refused_is_told_with_its_reason(run, bound) -> None:
    _unit(run, "one", calls=[_call(run, 1, key="same")], overlap=False)
    version = Run.objects.get(pk=run.pk).version
    _unit(run, "two", calls=[_call(run, 2, key="same")])  # the idempotency key is taken
    for i in range(bound - 1):
        _unit(run, f"behind it {i}")  # its own version check fails: the first reason is told
    with pytest.raises(UnitNotCommitted, match="duplicate key"):
        _unit(run, "three")
    assert list(ToolCall.objects.filter(run=run).values_list("tool_call_id", flat=True)) == [
        "tc_overlap1"]
    assert Run.objects.get(pk=run.pk).version == version


def test_a_slot_reads_its_unit_before_the_pool_takes_the_connection_back(pooled, run) -> None:
    _unit(run, "pooled")
    assert _in_flight()
    raw = connection.connection
    slots.db_release()
    assert connection.connection is None
    assert not _in_flight(raw)
    slots.db_reacquire()
    assert Event.objects.filter(run=run, type="run.note").count() == 2


def test_a_slot_whose_unit_did_not_commit_stops_before_handing_its_connection_back(
        pooled, run) -> None:
    Run.objects.filter(pk=run.pk).update(version=F("version") + 1)
    _unit(run, "lost")
    pool_idle = connection.pool.get_stats().get("pool_available", 0)
    with pytest.raises(UnitNotCommitted):
        slots.db_release()
    assert connection.connection is not None, "the connection went back to the pool"
    assert connection.pool.get_stats().get("pool_available", 0) == pool_idle


def test_a_tick_whose_run_changed_under_a_unit_in_flight_ends_lease_lost(engine, monkeypatch,
                                                                         bound):
    """A tick's outcome is told only once its units committed: the run changes under the
    second progress unit sent without waiting (a read's attempt opens in a fenced unit, so a
    no-op turn sends fewer of them), which is then in flight; the tick ends ``lease_lost`` (not
    ``succeeded``), and the log ends with the unit before. With two units in flight the worker
    sends one more before it reads the one that failed, and no more."""
    import bench.agents  # noqa: F401  (bench-noop: a no-op tool per turn)

    run_id = run_start(agent="bench-noop", goal="overlap", input={"steps": 20}).pk
    sent = {"n": 0, "seq": None, "told_then": None}
    real, told = unit_overlap.unit_send, []
    real_told = telemetry.events_committed
    monkeypatch.setattr(telemetry, "events_committed",
                        lambda session, events, **kw: (told.append(events),
                                                       real_told(session, events, **kw)))

    def send(raw, sql, params, what, on_row, **kw):
        sent["n"] += 1
        if sent["n"] == 2:  # another writer, on its own connection, just before this unit
            sent["told_then"] = len(told)
            import psycopg

            s = connection.settings_dict
            with psycopg.connect(host=s["HOST"] or "127.0.0.1", port=s["PORT"] or 5432,
                                 user=s["USER"], dbname=s["NAME"], autocommit=True) as other:
                sent["seq"] = other.execute(
                    "UPDATE runs_run SET version = version + 1 WHERE id = %s RETURNING last_seq",
                    [run_id]).fetchone()[0]
        real(raw, sql, params, what, on_row, **kw)

    monkeypatch.setattr(unit_overlap, "unit_send", send)
    seq_before = Run.objects.get(pk=run_id).last_seq
    assert run_tick(run_id, worker="w-overlap") == "lease_lost"
    assert sent["n"] == 1 + bound, "the worker went on after the unit that did not commit"
    assert Event.objects.filter(run_id=run_id).order_by("-seq").values_list(
        "seq", flat=True).first() == sent["seq"]
    assert Run.objects.get(pk=run_id).status == "running"  # left to lease expiry and recovery
    # The unit that did not commit was neither counted nor logged (its steps, its metrics):
    # the events told are the events committed. With two in flight the unit before it may
    # still have been unread when it went out (told after), or read already (a loaded
    # machine answers it first).
    claimed = Event.objects.filter(run_id=run_id, seq__gt=seq_before).order_by("seq").first()
    assert claimed.type == "run.status"  # the claim's own event, not a unit's
    assert sum(len(events) for events in told) == Event.objects.filter(
        run_id=run_id, seq__gt=claimed.seq).count()
    assert sent["told_then"] <= len(told) <= sent["told_then"] + bound - 1


def test_a_whole_run_through_units_in_flight_succeeds_with_every_step_recorded(engine):
    import bench.agents  # noqa: F401

    run_id = run_start(agent="bench-noop", goal="overlap", input={"steps": 30}).pk
    assert run_tick(run_id, worker="w-overlap") == "succeeded"
    run = Run.objects.get(pk=run_id)
    assert run.status == "succeeded" and run.tool_calls == 30
    assert ToolCall.objects.filter(run_id=run_id, status="succeeded").count() == 30
    seqs = list(Event.objects.filter(run_id=run_id).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)) and seqs[-1] == run.last_seq


def test_a_unit_whose_prepared_statement_was_deallocated_is_prepared_and_sent_again(
        run, bound) -> None:
    """psycopg deallocates every prepared statement after a rollback while it holds one of
    its own: the engine's statement goes with them, and the unit (with the one behind it,
    when two are in flight) is sent again."""
    from django.db import transaction

    _unit(run, "prepares")  # the overlapped statement is prepared on this connection
    _unit(run, "psycopg's", overlap=False)  # psycopg prepares its own (the waiting path)
    with pytest.raises(RuntimeError), transaction.atomic():
        Run.objects.filter(pk=run.pk).exists()
        raise RuntimeError("rolled back")  # psycopg: ROLLBACK, then DEALLOCATE ALL
    _unit(run, "after the rollback")
    _unit(run, "and the next")  # one in flight: reads the one before, which committed
    assert [d["note"] for d in Event.objects.filter(run=run, type="run.note").order_by("seq")
            .values_list("data", flat=True)][-2:] == ["after the rollback", "and the next"]


def test_a_unit_that_failed_in_a_tick_ended_otherwise_is_not_the_next_tick_s(engine, monkeypatch):
    """A tick ends lease_lost for another reason (its lease is found lost) while its unit,
    which did not commit, is still in flight: the next tick on this connection, of another
    run, must not be told that unit's failure."""
    import bench.agents  # noqa: F401
    from agentops.control import LeaseLost
    from runs.engine.runtime import loop

    first = run_start(agent="bench-noop", goal="ends", input={"steps": 20}).pk
    second = run_start(agent="bench-noop", goal="next", input={"steps": 3}).pk
    sent, real_send, real_unit = {"n": 0}, unit_overlap.unit_send, loop.unit

    def send(raw, sql, params, what, on_row, **kw):
        sent["n"] += 1
        if sent["n"] == 2:
            Run.objects.filter(pk=first).update(version=F("version") + 1)
        real_send(raw, sql, params, what, on_row, **kw)

    def unit(session):
        if sent["n"] >= 2 and session.run.pk == first:
            raise LeaseLost("the keeper found the lease lost")  # before any read of the unit
        real_unit(session)

    monkeypatch.setattr(unit_overlap, "unit_send", send)
    monkeypatch.setattr(loop, "unit", unit)
    assert run_tick(first, worker="w-overlap") == "lease_lost"
    assert run_tick(second, worker="w-overlap") == "succeeded"


def _attempt(call):
    from agentops import clock

    return ToolAttempt(tool_call=call, attempt=1, status="succeeded", worker="w",
                       started_at=clock.now(), finished_at=clock.now(), duration_ms=3)


def test_the_next_unit_is_built_while_the_one_before_is_still_in_flight(run, monkeypatch):
    """The server commits a unit while the worker builds the next one's statement: its rows
    are encoded and its parameters dumped before the unit in flight is read, and it still
    goes out only after it."""
    built_in_flight: list[bool] = []
    dumped_in_flight: list[bool] = []
    encode, dump = unit_sql._rows_json, unit_overlap.unit_dumped

    def rows_json(*args):
        built_in_flight.append(_in_flight())
        return encode(*args)

    def dumped(*args):
        dumped_in_flight.append(_in_flight())
        return dump(*args)

    monkeypatch.setattr(unit_sql, "_rows_json", rows_json)
    monkeypatch.setattr(unit_overlap, "unit_dumped", dumped)
    _unit(run, "first", calls=[_call(run, 1)])
    _unit(run, "second", calls=[_call(run, 2)])
    assert built_in_flight == [False, True]
    assert dumped_in_flight == [False, True]  # its parameters as sent, too
    assert list(ToolCall.objects.filter(run=run).order_by("turn").values_list(
        "tool_call_id", flat=True)) == ["tc_overlap1", "tc_overlap2"]


def test_a_row_of_a_row_the_unit_in_flight_inserts_gets_its_id(run) -> None:
    """Built while the unit inserting its call is in flight, an attempt row cannot know the
    call's id yet: the unit is built again once that one is read, and stores the id."""
    first, second = _call(run, 1), _call(run, 2)
    _unit(run, "calls", calls=[first])
    assert first.pk is None
    event_append(run=run, expected_version=run.version, events=[NewEvent("run.note", {})],
                 also=[toolcalls_insert([second]), attempts_insert([_attempt(first),
                                                                    _attempt(second)])],
                 secrets=EMPTY, overlap=True)
    unit_sql.unit_settled()  # raises if it did not commit
    stored = dict(ToolAttempt.objects.filter(tool_call__run=run).values_list(
        "tool_call__tool_call_id", "tool_call_id"))
    assert stored == {"tc_overlap1": first.pk, "tc_overlap2": second.pk}


def test_a_unit_not_built_while_the_one_before_failed_is_told_the_failure(run) -> None:
    """A unit whose statement cannot be built reports the unit in flight that did not commit
    first (the worker stops for that, LeaseLost), as when it was read before building."""
    Run.objects.filter(pk=run.pk).update(version=F("version") + 1)
    _unit(run, "lost")
    with pytest.raises(UnitNotCommitted):
        event_append(run=run, expected_version=run.version, events=[], touch=False,
                     fields={"updated_at": object()}, secrets=EMPTY, overlap=True)


def test_units_behind_one_whose_statement_was_deallocated_are_sent_again_in_order(
        run, settings) -> None:
    """Two units in flight: the first names a statement psycopg deallocated (it fails at
    bind), the second one prepared since (it fails its version check, the first not having
    run). Both are sent again, in order, and both commit."""
    _not_behind_a_pooler()
    from django.db import transaction

    settings.AGENTOPS_UNITS_IN_FLIGHT = 2
    _unit(run, "a")  # prepares the note-only statement
    _unit(run, "psycopg's", overlap=False)
    with pytest.raises(RuntimeError), transaction.atomic():
        Run.objects.filter(pk=run.pk).exists()
        raise RuntimeError("rolled back")  # DEALLOCATE ALL: the note-only statement is gone
    _unit(run, "b", calls=[_call(run, 1)])  # a statement prepared now
    _unit(run, "c")  # the deallocated one, in flight ...
    _unit(run, "d", calls=[_call(run, 2)])  # ... with this one behind it
    assert _in_flight()
    notes = [d["note"] for d in Event.objects.filter(run=run, type="run.note").order_by("seq")
             .values_list("data", flat=True)]
    assert notes == ["opening", "a", "psycopg's", "b", "c", "d"]
    unit_sql.unit_settled()  # nothing failed
    assert sorted(ToolCall.objects.filter(run=run).values_list("turn", flat=True)) == [1, 2]
    assert Run.objects.get(pk=run.pk).version == run.version
