"""The statements a tick sends for what it reads once: the run's secrets (its sealed tool
arguments) are read at the claim, by one statement on the tool-call table alone, and
reused by the session the tick opens. (On PostgreSQL a run with no sealed call is claimed by
one statement that reads none: runs.engine.runtime.claim_sql; these runs have one.)"""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.engine.runtime.loop import run_tick
from runs.services import run_start

pytestmark = pytest.mark.django_db


def _secret_reads(seen: CaptureQueriesContext) -> list[str]:
    """The statements reading only the sealed arguments of a run's calls (run_secrets)."""
    return [q["sql"] for q in seen.captured_queries
            if q["sql"].startswith('SELECT "ledger_toolcall"."tool_call_id", "ledger_toolcall"'
                                   '."sealed_args"')
            or q["sql"].startswith('SELECT "ledger_toolcall"."tool_call_id" AS "tool_call_id", '
                                   '"ledger_toolcall"."sealed_args"')]


def _sealed_run(engine):
    """A queued run with a settled call whose arguments were sealed (a secret to scrub)."""
    from ledger.models import ToolCall
    from ledger.sealed import seal

    engine.make_agent("once", {"s": [engine.say("ok")]}, plan=["s"])
    run = run_start(agent="once", goal="g")
    ToolCall.objects.create(tool_call_id="tc_sealed", run=run, step_key="s", turn=1,
                            tool="login", args_hash="h", idempotency_key="k",
                            status="succeeded", sealed_args=seal({"token": "hunter22"}))
    return run.pk


def test_a_tick_reads_the_runs_secrets_once(engine):
    run_id = _sealed_run(engine)
    with CaptureQueriesContext(connection) as seen:
        assert run_tick(run_id, worker="w:1") == "succeeded"
    assert len(_secret_reads(seen)) == 1


def test_the_secrets_read_joins_no_other_table(engine):
    run_id = _sealed_run(engine)
    with CaptureQueriesContext(connection) as seen:
        run_tick(run_id, worker="w:1")
    assert _secret_reads(seen) and all("JOIN" not in sql for sql in _secret_reads(seen))


def test_a_runs_end_reads_its_unknown_calls_without_joining_the_run(engine, monkeypatch):
    from runs.engine.runtime import exceptions

    engine.make_agent("once", {"s": [engine.say("ok")]}, plan=["s"])
    run_id = run_start(agent="once", goal="g").pk
    prepared, real = [], exceptions.prepared_rows  # PostgreSQL: a prepared statement
    monkeypatch.setattr(exceptions, "prepared_rows",
                        lambda sql, params: prepared.append(sql) or real(sql, params))
    with CaptureQueriesContext(connection) as seen:
        assert run_tick(run_id, worker="w:1") == "succeeded"
    unknown = [sql for sql in [q["sql"] for q in seen.captured_queries] + prepared
               if sql.startswith("SELECT") and "ledger_toolcall" in sql and "unknown" in sql]
    assert len(unknown) == 1 and "JOIN" not in unknown[0]
