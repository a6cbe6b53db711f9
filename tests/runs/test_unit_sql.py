"""A lease holder's unit as one SQL statement (PostgreSQL): same rows as the ORM, all or nothing."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentops.redaction import EMPTY
from agentops.writes import RowsInsert, RowsUpdate
from ledger.errors import DuplicateToolCall
from ledger.models import ToolAttempt, ToolCall
from ledger.services.record import attempts_insert, toolcalls_insert
from runs.engine.runtime import unit_where
from runs.engine.runtime.events import NewEvent, event_append
from agentops.control import LeaseLost
from runs.models import Event, Run, Step
from runs.services import run_start
from tests.conftest import drive

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def _call(run, n, key=None):
    return ToolCall(tool_call_id=f"tc_unit{n}", run=run, step_key="s", turn=n, tool="lookup",
                    args={"item": n}, args_hash="h", idempotency_key=key or f"key{n}",
                    status="succeeded", attempts=1, facts={"n": n})


def _attempt(call):
    from agentops import clock

    return ToolAttempt(tool_call=call, attempt=1, status="succeeded", worker="w",
                       started_at=clock.now(), finished_at=clock.now(), duration_ms=3)


def test_a_unit_is_one_statement_with_the_attempts_pointing_at_their_new_rows(run):
    calls = [_call(run, 1), _call(run, 2)]
    with CaptureQueriesContext(connection) as queries:
        written = event_append(
            run=run, expected_version=run.version, fields={"tool_calls": 2},
            events=[NewEvent("model.replied", {"turn": 1, "text": "é \u2603"}),
                    NewEvent("tool.result", {"id": "tc_unit1"}, tool_call_id="tc_unit1", attempt=1)],
            also=[toolcalls_insert(calls), attempts_insert([_attempt(c) for c in calls])],
            secrets=EMPTY)  # a worker's session passes the run's secrets it read once
    # The statement goes through its own psycopg cursor; all Django ran is the savepoint
    # around it (the test holds a transaction open; a worker runs in autocommit).
    assert [q["sql"].split()[0] for q in queries] == ["SAVEPOINT", "RELEASE"]
    assert len(written) == 2
    stored = {c.tool_call_id: c for c in ToolCall.objects.filter(run=run)}
    assert {c.tool_call_id: c.pk for c in calls} == {k: c.pk for k, c in stored.items()}
    assert stored["tc_unit2"].facts == {"n": 2} and stored["tc_unit2"].args == {"item": 2}
    attempts = ToolAttempt.objects.filter(tool_call__run=run).order_by("tool_call__turn")
    assert [a.tool_call.tool_call_id for a in attempts] == ["tc_unit1", "tc_unit2"]
    events = list(Event.objects.filter(run=run).order_by("seq"))
    assert [e.type for e in events][-2:] == ["model.replied", "tool.result"]
    assert events[-2].data["text"] == "é \u2603" and events[-1].attempt == 1
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.tool_calls == 2 and fresh.last_seq == events[-1].seq == run.last_seq
    assert fresh.version == run.version


def test_a_stale_version_writes_nothing_at_all(run):
    stale = run.version
    event_append(run=run, events=[NewEvent("run.note", {"by": "someone else"})])
    before = Event.objects.filter(run=run).count()
    with pytest.raises(LeaseLost):
        event_append(run=run, expected_version=stale, events=[NewEvent("run.note", {})],
                     also=[toolcalls_insert([_call(run, 1)])])
    assert Event.objects.filter(run=run).count() == before
    assert not ToolCall.objects.filter(run=run).exists()


def test_a_reused_idempotency_key_is_the_typed_error_and_nothing_is_written(run):
    event_append(run=run, expected_version=run.version, events=[],
                 also=[toolcalls_insert([_call(run, 1, key="same")])])
    version, seq = run.version, run.last_seq
    with pytest.raises(DuplicateToolCall):
        event_append(run=run, expected_version=run.version, events=[NewEvent("run.note", {})],
                     also=[toolcalls_insert([_call(run, 2, key="same")])])
    assert ToolCall.objects.filter(run=run).count() == 1
    assert (run.version, run.last_seq) == (version, seq)
    assert Run.objects.get(pk=run.pk).last_seq == seq


def test_a_keyed_event_already_logged_is_dropped_and_the_rest_written(run):
    event_append(run=run, expected_version=run.version,
                 events=[NewEvent("signal.received", {"name": "go"}, key="sig-1")])
    written = event_append(run=run, expected_version=run.version,
                           events=[NewEvent("signal.received", {"name": "go"}, key="sig-1"),
                                   NewEvent("run.note", {"after": "signal"})])
    assert [e.type for e in written] == ["run.note"]
    assert Event.objects.filter(key="sig-1").count() == 1


def test_updates_fold_in_and_match_only_their_rows(run):
    Step.objects.create(run=run, key="a", position=0)
    Step.objects.create(run=run, key="b", position=1)
    event_append(run=run, expected_version=run.version, events=[],
                 also=[RowsUpdate(Step, {"run_id": run.pk, "key": "b"}, {"status": "running"})])
    assert dict(Step.objects.filter(run=run).values_list("key", "status")) == {
        "a": "pending", "b": "running"}


def test_what_cannot_fold_is_told_apart():
    call = ToolCall(tool_call_id="tc_x")
    assert unit_where.foldable([RowsInsert(ToolCall, [call]), RowsUpdate(Step, {"key": "a"}, {})])
    assert not unit_where.foldable([lambda: None])
    assert not unit_where.foldable([RowsUpdate(Step, {"key": "a"}, {}),
                                  RowsUpdate(Step, {"key": "a"}, {"status": "x"})])
    # An update of a row the same statement inserts would miss it (a sibling part does not
    # see it): told by the row's own values, so an update of another row still folds.
    assert not unit_where.foldable([RowsInsert(Step, [Step(key="a")]),
                                  RowsUpdate(Step, {"key": "a"}, {})])
    assert unit_where.foldable([RowsInsert(Step, [Step(key="b")]),
                              RowsUpdate(Step, {"key": "a"}, {})])
    # A read's result riding the next unit: its call and attempt (ids known) updated, the
    # next call and its attempt (ids given by this statement) inserted.
    assert unit_where.foldable([RowsUpdate(ToolCall, {"pk": 7}, {"status": "succeeded"}),
                              RowsUpdate(ToolAttempt, {"tool_call_id": 7, "attempt": 1}, {}),
                              RowsInsert(ToolCall, [call]),
                              RowsInsert(ToolAttempt, [ToolAttempt(tool_call=call, attempt=1)])])
    assert not unit_where.foldable([RowsInsert(ToolAttempt, [ToolAttempt(tool_call_id=7, attempt=1)]),
                                  RowsUpdate(ToolAttempt, {"tool_call_id": 7, "attempt": 1}, {})])
    # An empty insert writes nothing: a tool step's settlement (the attempt opened in an
    # earlier unit closed, no fresh attempt) still folds into one statement.
    assert unit_where.foldable([RowsInsert(ToolAttempt, []),
                              RowsUpdate(ToolAttempt, {"tool_call_id": 1, "attempt": 1}, {})])
    assert not unit_where.foldable([RowsUpdate(ToolCall, {"pk": None}, {"status": "x"})])


def test_a_unit_with_a_writer_that_cannot_fold_is_written_through_the_orm_all_the_same(run):
    ran = []
    with CaptureQueriesContext(connection) as queries:
        event_append(run=run, expected_version=run.version, events=[NewEvent("run.note", {})],
                     also=[toolcalls_insert([_call(run, 1)]), lambda: ran.append(1)])
    sql = " ".join(q["sql"] for q in queries)
    assert 'INSERT INTO "runs_event"' in sql and 'INSERT INTO "ledger_toolcall"' in sql
    assert ran == [1] and ToolCall.objects.filter(run=run).count() == 1
    assert Run.objects.get(pk=run.pk).last_seq == run.last_seq


def _recorded(run):
    events = [(e.seq, e.type, e.data, e.tool_call_id, e.attempt)
              for e in Event.objects.filter(run=run).order_by("seq")]
    calls = [(c.turn, c.tool, c.args, c.status, c.attempts, c.facts, c.summary, c.effect)
             for c in ToolCall.objects.filter(run=run).order_by("turn", "index")]
    attempts = [(a.tool_call.turn, a.attempt, a.status, a.error_class)
                for a in ToolAttempt.objects.filter(tool_call__run=run).order_by("pk")]
    steps = list(Step.objects.filter(run=run).order_by("position")
                 .values_list("key", "status", "retry_count", "output"))
    fresh = Run.objects.get(pk=run.pk)
    return events, calls, attempts, steps, (fresh.status, fresh.last_seq, fresh.tool_calls,
                                            fresh.model_calls, fresh.steps_done)


def _ids_out(value):
    """Replace the random tool call ids (and how long each model call took) in recorded data
    so two runs compare."""
    import re

    return re.sub(r"'ms': \d+", "'ms': *", re.sub(r"tc_[0-9a-z]+", "tc_*", repr(value)))


def test_a_whole_run_records_the_same_through_one_statement_as_through_the_orm(engine, settings):
    from ledger.errors import ToolTransient

    engine.make_agent("mixed", engine.MIXED_SCRIPT, plan=["quote", "pay", "ship", "notify"])
    recorded = []
    for one_statement in (True, False):
        settings.AGENTOPS_UNIT_SQL = one_statement
        engine.world.effects.clear()
        engine.world.fail_next["lookup"] = [ToolTransient("503")]
        run = run_start(agent="mixed", goal="sell a book")
        assert drive(run) == "succeeded"
        recorded.append(_ids_out(_recorded(run)))
    assert recorded[0] == recorded[1]


def test_deleting_a_run_through_the_orm_takes_its_log_and_ledger_with_it(run):
    calls = [_call(run, 1)]
    event_append(run=run, expected_version=run.version, events=[NewEvent("run.note", {})],
                 also=[toolcalls_insert(calls), attempts_insert([_attempt(calls[0])])])
    assert Event.objects.filter(run_id=run.pk).exists()
    Run.objects.filter(pk=run.pk).delete()  # no database FK on these tables: Django cascades
    assert not Event.objects.filter(run_id=run.pk).exists()
    assert not ToolCall.objects.filter(run_id=run.pk).exists()
    assert not ToolAttempt.objects.filter(tool_call_id=calls[0].pk).exists()


def test_a_lease_holder_renews_its_lease_every_third_of_the_ttl_not_every_unit(engine, settings):
    import datetime as dt

    from agentops import clock
    from runs.engine.runtime.loop import session_open
    from tests.clock_helpers import clock_reads
    from runs.engine.runtime.transition import run_claim

    settings.AGENTOPS_LEASE_TTL_S = 3.0
    start = clock.now()
    t = {"now": start}
    with clock_reads(lambda: t["now"]):
        engine.make_agent("renewer", {"s": [engine.say("ok")]}, plan=["s"])
        run = run_start(agent="renewer", goal="g")
        claimed = run_claim(run_id=run.pk, owner="w", ttl_s=3.0)
        session = session_open(claimed, "w")
        granted = Run.objects.get(pk=run.pk).lease_expires_at
        t["now"] = start + dt.timedelta(seconds=0.9)  # under a third of the TTL: no renewal
        session.commit([NewEvent("run.note", {"text": "one"})])
        assert Run.objects.get(pk=run.pk).lease_expires_at == granted
        t["now"] = start + dt.timedelta(seconds=1.1)  # past a third: pushed a full TTL on
        session.commit([NewEvent("run.note", {"text": "two"})])
        fresh = Run.objects.get(pk=run.pk)
        assert fresh.lease_expires_at == t["now"] + dt.timedelta(seconds=3.0)
        assert fresh.updated_at == t["now"]


def test_a_read_tool_step_settles_in_one_statement_not_through_the_orm(engine):
    """The attempt opened by the call's own unit is closed by the settling unit, with no
    fresh attempt: that unit is still one statement (no ORM UPDATE of the attempt row)."""
    engine.make_agent("reader", {"s": [engine.call("lookup", item="book"), engine.say("ok")]},
                      plan=["s"])
    run = run_start(agent="reader", goal="read")
    with CaptureQueriesContext(connection) as queries:
        assert drive(run) == "succeeded"
    plain = [q["sql"] for q in queries if q["sql"].startswith('UPDATE "ledger_toolattempt"')]
    assert plain == []
    attempt = ToolAttempt.objects.get(tool_call__run_id=run.pk)
    assert attempt.status == "succeeded" and attempt.finished_at is not None
