"""A claim as ONE SQL statement on PostgreSQL: the lease, its ``run.status`` event, the row back.

Through ``runs.engine.runtime.transition.run_claim``'s general path a claim is BEGIN, the
conditional UPDATE, the read of the run's sealed arguments (its secrets), a SAVEPOINT, the
event's write, RELEASE and COMMIT: seven round trips before a tick starts. Here it is one
data-modifying ``WITH`` statement, which PostgreSQL runs as one transaction:

    WITH r AS (UPDATE runs_run SET status = 'running', lease ..., version = version + 1,
               last_seq = last_seq + 1 WHERE id = %s AND status = 'queued'
               AND NOT EXISTS (a sealed call of the run) RETURNING *),
         e AS (INSERT INTO runs_event (...) SELECT r.id, r.last_seq, ... FROM r)
    SELECT r.<columns>, <its latest snapshot>, <the events after it> FROM r

The conditional UPDATE is still the claim (of two workers only one matches status=queued),
and the event commits with it or not at all. The event is scrubbed before it is sent, so
it must be scrubbed with every secret of the run: a run with no sealed call has only the
configured ones, known here; a run with one is left alone by this statement (no row back)
and the caller takes the general path, which reads its secrets first. Nobody writes a queued
run's calls (only a lease holder does), so the NOT EXISTS holds until the claim commits.

The same statement reads what the tick loads next (``claimed_state``): the run's latest
snapshot and the events after it, plus the claim event it wrote (its reads do not see it),
and its team's tool limits (``claimed_limits``).
"""
from __future__ import annotations

import datetime as dt
import json
from functools import cache
from typing import Any

from django.db import connection

from agentops import causes
from agentops.redaction import Secrets, configured_secrets
from ledger.models import ToolCall, ToolLimit
from ledger.services.limits import limits_from_json, limits_load
from runs.engine.runtime.events import NewEvent, events_scrubbed
from runs.engine.runtime.prepared import prepared_rows
from runs.event_types import EventType
from runs.engine.runtime.snapshots import load_state, state_build
from runs.models import Event, Run, Snapshot
from runs.models.event import CURRENT_EVENT_SCHEMA
from runs.statuses import RunStatus


def claim_one_statement(*, run_id: Any, owner: str, now: dt.datetime,
                        expires: dt.datetime) -> tuple[Run, Secrets] | None:
    """Claim a queued run with no sealed call in one statement; return it and its secrets.

    None: nothing was written (the run is not queued, or it has sealed calls): the caller
    takes the general path, which tells the two apart.
    """
    secrets = configured_secrets()
    event = events_scrubbed([NewEvent(EventType.RUN_STATUS, {
        "from": RunStatus.QUEUED, "to": RunStatus.RUNNING, "owner": owner})], secrets)[0]
    # Its cause as causes_for gives it: the open one, else the run's event before it.
    opened = causes.cause_open()[:causes.MAX_LENGTH]
    rows = prepared_rows(_sql(), [RunStatus.RUNNING, owner, expires, now, now, run_id,
                                  RunStatus.QUEUED, run_id, event.type, event.data_json,
                                  event.actor, opened, opened, now])
    if not rows:
        return None
    row = rows[0]
    fields = Run._meta.concrete_fields
    run = Run.from_db(connection.alias, [f.attname for f in fields],
                      [_from_db(f, v) for f, v in zip(fields, row)])
    snap, tail, limits = row[len(fields):]
    # The statement's own reads do not see its insert: the claim event ends the tail.
    tail = [{"seq": seq, "type": type_, "data": data} for seq, type_, data in json.loads(tail)]
    tail.append({"seq": run.last_seq, "type": event.type, "data": event.data})
    run.__dict__["_claim_read"] = (json.loads(snap) if snap else None, tail)
    run.__dict__["_claim_limits"] = limits_from_json(json.loads(limits))
    return run, secrets


def _from_db(field: Any, value: Any) -> Any:
    """Return a column's value as the ORM gives it (JSON arrives as text: decode it)."""
    return field.from_db_value(value, None, connection) if hasattr(field, "from_db_value") \
        else value


def claimed_state(run: Run) -> dict[str, Any]:
    """Return the state of a run just claimed: from what its claim read, else ``load_state``.

    The claim's statement read the run's latest snapshot and the events after it in the same
    snapshot of the database as the claim: the state is the one at the version claimed.
    """
    read = run.__dict__.pop("_claim_read", None)
    return load_state(run) if read is None else state_build(*read)


def claimed_limits(run: Run) -> dict[str, Any]:
    """Return the tool limits of the run's team as its claim read them, else read them now."""
    limits = run.__dict__.pop("_claim_limits", None)
    return limits_load(team_id=run.team_id) if limits is None else limits


@cache
def _sql() -> str:
    q = connection.ops.quote_name
    run, event, call = Run._meta.db_table, Event._meta.db_table, ToolCall._meta.db_table
    snap, limit = Snapshot._meta.db_table, ToolLimit._meta.db_table
    month = "date_trunc('month', r.created_at AT TIME ZONE 'UTC')::date"  # its events' partition
    cause = (f"CASE WHEN %s <> '' THEN %s WHEN r.last_seq > 1 "
             f"THEN '{causes.SEQ}:' || (r.last_seq - 1) ELSE '{causes.START}:' END")
    return (
        f"WITH r AS (UPDATE {q(run)} SET status = %s, lease_owner = %s, lease_expires_at = %s, "
        f"urgent = false, updated_at = %s, started_at = coalesce(started_at, %s), "
        f"version = version + 1, last_seq = last_seq + 1 "
        f"WHERE id = %s AND status = %s AND NOT EXISTS (SELECT 1 FROM {q(call)} c "
        f"WHERE c.run_id = %s AND c.sealed_args <> '') RETURNING *), "
        f"e AS (INSERT INTO {q(event)} (run_id, seq, type, data, tool_call_id, attempt, key, "
        f"schema_version, actor, caused_by, at, run_month) "
        f"SELECT r.id, r.last_seq, %s, %s::jsonb, '', NULL, NULL, {CURRENT_EVENT_SCHEMA}, "
        f"%s, {cause}, %s, {month} FROM r) "
        f"SELECT {', '.join('r.' + q(f.column) for f in Run._meta.concrete_fields)}, "
        f"s.doc AS claim_snapshot, (SELECT coalesce(json_agg(json_build_array("
        f"v.seq, v.type, v.data) ORDER BY v.seq), '[]')::text FROM {q(event)} v "
        f"WHERE v.run_id = r.id AND v.run_month = {month} AND v.seq > coalesce(s.seq, 0)) "
        f"AS claim_tail, (SELECT coalesce(json_agg(t), '[]')::text FROM {q(limit)} t "
        f"WHERE t.team_id = r.team_id) AS claim_limits FROM r LEFT JOIN LATERAL (SELECT seq, "
        f"json_build_object('seq', seq, 'state', state, 'schema_version', schema_version)::text "
        f"AS doc FROM {q(snap)} "
        f"WHERE run_id = r.id ORDER BY seq DESC LIMIT 1) s ON true")
