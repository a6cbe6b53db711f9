"""event_append: the one way facts enter a run's log, with the projection in one transaction.

Seq numbers are dense per run. A writer either holds the lease and passes the version it
last saw (one conditional UPDATE, no read), or has no lease and takes the row lock. Either
way the UPDATE of the run row serialises writers, so two writers never get the same seq.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, connection, transaction

from agentops import clock
from agentops.causes import causes_for
from agentops.control import LeaseLost
from agentops.jsonstate import check_json, compact_json, json_plain
from agentops.redaction import Secrets
from ledger.secrets import run_secrets
from runs.engine.runtime import unit_sql, unit_where
from runs.event_archive import archived_events_restore
from runs.errors import RunNotFound, UnknownEventType
from runs.event_types import EventType, is_known
from runs.live import live_run_changed
from runs.models import Event, Run, run_id_text
from runs.models.event import event_month, run_events


@dataclass
class NewEvent:
    """An event to append; ``key`` makes a second delivery of the same fact a no-op."""

    type: str
    data: dict[str, Any] = field(default_factory=dict)
    tool_call_id: str = ""
    attempt: int | None = None
    key: str | None = None
    actor: str = ""
    # Why it happened (agentops.causes); "" = stamped by event_append from the open cause.
    caused_by: str = ""

    def __post_init__(self) -> None:
        if not is_known(self.type):
            raise UnknownEventType(f"event type {self.type!r} is not declared in "
                                   "runs.event_types (reduced or audit-only)", type=self.type)
        if not json_plain(self.data):  # the path is made only to name what is wrong
            check_json(self.data, f"event[{self.type}].data")

    @property
    def data_json(self) -> str:
        """Return the JSON text of ``data`` (made once: sizing and the one-statement write use it).

        Kept in the instance's ``__dict__`` by hand: Python 3.11's ``cached_property`` takes a
        lock on every read, and this is read for every event of every unit.
        """
        text = self.__dict__.get("_data_json")
        if text is None:
            text = self.__dict__["_data_json"] = compact_json(self.data)
        return text


def events_scrubbed(events: Sequence[NewEvent], secrets: Secrets) -> list[NewEvent]:
    """Return ``events`` with every secret replaced (an event with none is kept as it is)."""
    if not secrets:
        return list(events)
    return [NewEvent(e.type, secrets.scrub(e.data, engine=True), e.tool_call_id, e.attempt,
                     e.key, secrets.scrub_text(e.actor), e.caused_by)
            if secrets.found_in(e.data_json) else e
            for e in events]


def fields_scrubbed(fields: dict[str, Any], secrets: Secrets) -> dict[str, Any]:
    """Return Run/ledger column values with secrets replaced in their text and JSON."""
    if not secrets:
        return fields
    return {k: secrets.scrub(v, engine=True) if isinstance(v, (str, dict, list)) else v
            for k, v in fields.items()}


def result_event(call_id: str, *, attempt: int | None = None, **data: Any) -> NewEvent:
    """Return the tool.result event (after_tool_call) of a settled call."""
    return NewEvent(EventType.TOOL_RESULT, {"id": call_id, **data}, tool_call_id=call_id,
                    attempt=attempt)


def event_append(
    *,
    run: Run,
    events: Sequence[NewEvent],
    expected_version: int | None = None,
    fields: dict[str, Any] | None = None,
    also: Iterable[Any] = (),
    touch: bool = True,
    secrets: Secrets | None = None,
    owner: str = "",
    overlap: bool = False,
) -> list[NewEvent]:
    """Append ``events`` to ``run`` and update its projection ``fields`` atomically.

    Events and fields are scrubbed of ``secrets`` first (default: the run's, read from its
    sealed tool arguments, plus the configured ones): no secret is ever written to the log.

    With ``expected_version`` (a lease holder) the write fails with LeaseLost when anyone else
    wrote since; without it the run row is locked first. Events whose key already exists are
    dropped (the existing fact stands). ``also`` are callables run inside the transaction
    (ledger rows written with the events). Returns the events written (a keyed event
    already in the log is dropped). ``touch=False`` leaves ``updated_at`` alone (a
    lease holder stamps it with each lease renewal: an indexed column written on every unit
    would make every Run update touch all of the table's indexes). ``owner`` (with
    ``expected_version``) also requires ``lease_owner = owner``: the fence before a side
    effect (runs.engine.runtime.tool_call). ``overlap`` (a lease holder's progress unit) may
    return before the unit commits (runs.engine.runtime.unit_overlap): its failure is raised
    by the run's next write as UnitNotCommitted.
    """
    fields = dict(fields or {})
    if "status" in fields:
        raise ValueError("status is written only by runs.engine.runtime.transition")
    if touch:
        fields.setdefault("updated_at", clock.now())
    return _append(run, list(events), expected_version, fields, list(also), secrets, owner,
                   overlap)


def _append(
    run: Run,
    events: list[NewEvent],
    expected_version: int | None,
    fields: dict[str, Any],
    also: list[Any],
    secrets: Secrets | None = None,
    owner: str = "",
    overlap: bool = False,
) -> list[NewEvent]:
    if secrets is None:
        secrets = run_secrets(run.pk)
    events, fields = events_scrubbed(events, secrets), fields_scrubbed(fields, secrets)
    written = _append_rows(run, events, expected_version, fields, also, owner, overlap)
    status = fields.get("status")
    for e in events:
        if e.type == EventType.RUN_STATUS:
            status = e.data.get("to", status)
    actor = next((e.actor for e in reversed(events) if e.actor), "")
    live_run_changed(run_id_text(run), status=status, actor=actor,
                     lease_holder=expected_version is not None, team_id=run.team_id,
                     before_send=unit_sql.unit_settled)
    return written


def _append_rows(
    run: Run,
    events: list[NewEvent],
    expected_version: int | None,
    fields: dict[str, Any],
    also: list[Any],
    owner: str,
    overlap: bool = False,
) -> list[NewEvent]:
    # A unit follows the one still in flight only once that one committed: each path reads
    # it (and stops, LeaseLost, if it did not) before it writes, whose own version check
    # could otherwise match the version another writer left. The one statement reads it
    # itself, once its statement is built (unit_sql.unit_write).
    if expected_version is not None and unit_sql.enabled() and unit_where.foldable(also):
        # A keyed event may meet its twin (IntegrityError, sorted out below): never overlapped.
        overlap = overlap and not any(e.key for e in events)
        try:
            return _write_one_statement(run, events, expected_version, fields, also, owner,
                                        overlap)
        except IntegrityError:
            pass  # the ORM path below sorts out keyed duplicates and raises the typed errors
    if expected_version is not None:
        unit_sql.unit_settled()
    try:
        with transaction.atomic():
            return _write(run, events, expected_version, fields, also, owner)
    except IntegrityError:
        keyed = [e.key for e in events if e.key]
        if not keyed:
            raise
        seen = set(Event.objects.filter(key__in=keyed).values_list("key", flat=True))
        if not seen:
            raise
        fresh = [e for e in events if not e.key or e.key not in seen]
        if expected_version is None:
            run.refresh_from_db(fields=["version", "last_seq"])
        if not fresh and not fields and not also:
            return []
        with transaction.atomic():
            return _write(run, fresh, expected_version, fields, also, owner)


def _write_one_statement(run: Run, events: list[NewEvent], expected_version: int,
                         fields: dict[str, Any], also: list[Any], owner: str,
                         overlap: bool = False) -> list[NewEvent]:
    values = _run_values(run, fields, expected_version, len(events))
    _stamp_causes(events, run.last_seq + 1)
    if not unit_sql.unit_write(run=run, events=events, first_seq=run.last_seq + 1,
                               at=clock.now(), expected_version=expected_version,
                               values=values, also=also, owner=owner, overlap=overlap):
        raise LeaseLost(f"run {run.pk} changed since version {expected_version}")
    for name, value in values.items():
        setattr(run, name, value)
    return events


def _run_values(run: Run, fields: dict[str, Any], expected_version: int,
               n: int) -> dict[str, Any]:
    return {**fields, "version": expected_version + 1, "last_seq": run.last_seq + n}


def _stamp_causes(events: list[NewEvent], first_seq: int) -> None:
    """Give each event without a cause the open one, or the event before it (agentops.causes).

    A stamped cause is marked as such, so a second try (keyed duplicates dropped, other seqs)
    stamps again from the seqs it really gets.
    """
    given = [e.caused_by if not e.__dict__.get("_stamped") else "" for e in events]
    for e, mine, cause in zip(events, given, causes_for(len(events), first_seq, given)):
        e.caused_by = cause
        e.__dict__["_stamped"] = not mine


def _event_rows(run: Run, events: list[NewEvent], now: Any) -> list[Event]:
    first = run.last_seq + 1
    _stamp_causes(events, first)
    month = event_month(run)
    return [Event(run_id=run.pk, seq=first + i, type=e.type, data=e.data,
                  tool_call_id=e.tool_call_id, attempt=e.attempt, key=e.key, actor=e.actor,
                  caused_by=e.caused_by, at=now, run_month=month)
            for i, e in enumerate(events)]



def _write(
    run: Run,
    events: list[NewEvent],
    expected_version: int | None,
    fields: dict[str, Any],
    also: list[Any],
    owner: str = "",
) -> list[NewEvent]:
    if expected_version is None:
        locked = (
            Run.objects.select_for_update()
            .filter(pk=run.pk)
            .values("version", "last_seq", "status")
            .first()
        )
        if locked is None:
            raise RunNotFound(f"run {run.pk} does not exist")
        run.version, run.last_seq = locked["version"], locked["last_seq"]
        expected_version = run.version
    now = clock.now()
    values = _run_values(run, fields, expected_version, len(events))
    match = {"lease_owner": owner} if owner else {}
    updated = Run.objects.filter(pk=run.pk, version=expected_version, **match).update(**values)
    if updated != 1:
        raise LeaseLost(f"run {run.pk} changed since version {expected_version}")
    rows = _event_rows(run, events, now)
    if rows:
        Event.objects.bulk_create(rows)
    for fn in also:
        fn()
    for name, value in values.items():
        setattr(run, name, value)
    return events


def event_tail(run: Any, after_seq: int) -> list[dict[str, Any]]:
    """Return the events of a run after ``after_seq`` as plain dicts (what reduce reads), in order.

    ``run`` is the Run (its month known: PostgreSQL plans one partition) or its id (the
    month read in the same statement). A run whose log was archived (runs.event_archive) and
    is not here has it read back first.
    """
    tail = _tail(run, after_seq)
    if not tail and archived_events_restore(getattr(run, "pk", run)):
        tail = _tail(run, after_seq)
    return tail


def _tail(run: Any, after_seq: int) -> list[dict[str, Any]]:
    if connection.vendor == "postgresql":
        # Half the time of the ORM's row handling: the data as text, decoded here.
        if isinstance(run, Run):
            sql, args = _TAIL_SQL.format(month="%s"), [run.pk, event_month(run), after_seq]
        else:
            sql, args = _TAIL_SQL.format(month=_MONTH_OF_RUN), [run, run, after_seq]
        with connection.cursor() as cursor:
            cursor.execute(sql, args)
            loads = json.loads
            return [{"seq": seq, "type": type_, "data": loads(data)}
                    for seq, type_, data in cursor.fetchall()]
    rows = run_events(run).filter(seq__gt=after_seq).order_by("seq").values_list(
        "seq", "type", "data")
    return [{"seq": seq, "type": type_, "data": data} for seq, type_, data in rows]


# The month is the partition key: with it PostgreSQL reads one partition (runs.partitions).
_TAIL_SQL = ("SELECT seq, type, data::text FROM runs_event WHERE run_id = %s "
             "AND run_month = {month} AND seq > %s ORDER BY seq")
_MONTH_OF_RUN = ("(SELECT date_trunc('month', created_at AT TIME ZONE 'UTC')::date "
                 "FROM runs_run WHERE id = %s)")
