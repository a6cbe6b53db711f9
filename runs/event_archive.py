"""Archived event logs: a dropped partition's runs in an S3-compatible store, read back on use.

Before a partition is dropped (runs.partitions) each run's events are written as one gzip'd
JSON-lines object ``<prefix><YYYY-MM>/<run id>.jsonl.gz``, read back and compared by SHA-256,
and recorded (runs.models.EventArchive); only then is the partition dropped. A run whose
events are archived still opens, replays and exports: the first read that finds its log
empty (``archived_events_restore``) fetches the object, checks it against the recorded
digest and writes the events back into the event table, once: into their month's
partition if one is there again, else into the default partition (runs.partitions moves them
into the month's partition when it is made).
"""
from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import importlib
import json
import time
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from agentops import clock
from agentops.errors import AgentOpsError
from runs.models import Event, EventArchive, Run
from runs.statuses import TERMINAL

_COLUMNS = ("seq", "type", "data", "tool_call_id", "attempt", "key", "schema_version", "actor",
            "caused_by", "at")
_ANY = {"at": 0.0, "any": False}
_ANY_TTL_S = 60.0


class ArchiveError(AgentOpsError):
    """The archive store is not configured, unreachable, or gave back other bytes."""

    code = "archive_error"
    http_status = 503


def _client() -> Any:
    """Return an S3 client; boto3 is imported here, by hosts that use the archive only."""
    if not settings.AGENTOPS_ARCHIVE_S3_BUCKET:
        raise ArchiveError("no archive store: set AGENTOPS_ARCHIVE_S3_BUCKET (and "
                           "AGENTOPS_ARCHIVE_S3_ENDPOINT_URL for a store other than AWS)")
    try:
        boto3 = importlib.import_module("boto3")
    except ImportError as exc:
        raise ArchiveError("the archive store needs boto3: pip install 'agentops[archive]'"
                           ) from exc
    return boto3.client("s3", endpoint_url=settings.AGENTOPS_ARCHIVE_S3_ENDPOINT_URL or None)


def _store_errors() -> tuple[type[Exception], ...]:
    errors = importlib.import_module("botocore.exceptions")
    return (errors.BotoCoreError, errors.ClientError)


def _object_key(run_id: Any, month: dt.date) -> str:
    return f"{settings.AGENTOPS_ARCHIVE_S3_PREFIX}{month:%Y-%m}/{run_id}.jsonl.gz"


def _encode(rows: list[tuple]) -> bytes:
    lines = [json.dumps(dict(zip(_COLUMNS, (*row[:-1], row[-1].isoformat()))),
                        separators=(",", ":"), sort_keys=True) for row in rows]
    return gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)


def _run_rows(partition: str, run_id: Any) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT seq, type, data::text, tool_call_id, attempt, key, "
                       f"schema_version, actor, caused_by, at FROM {partition} "
                       f"WHERE run_id = %s ORDER BY seq", [run_id])
        return [(*row[:2], json.loads(row[2]), *row[3:]) for row in cursor.fetchall()]


def _put_checked(client: Any, key: str, body: bytes) -> str:
    """Upload ``body`` and read it back: return its SHA-256 once the store holds those bytes."""
    digest = hashlib.sha256(body).hexdigest()
    bucket = settings.AGENTOPS_ARCHIVE_S3_BUCKET
    try:
        client.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/gzip",
                          Metadata={"sha256": digest})
        back = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except _store_errors() as exc:
        raise ArchiveError(f"archive store: writing {key} failed: {exc}") from exc
    if hashlib.sha256(back).hexdigest() != digest:
        raise ArchiveError(f"archive store: {key} read back differs from what was written")
    return digest


def archive_partition(partition: str) -> int:
    """Write every run of ``partition`` to the archive store, checked; return how many runs."""
    client = _client()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT DISTINCT run_id, run_month FROM {partition}")
        runs = cursor.fetchall()
    for run_id, month in runs:
        rows = _run_rows(partition, run_id)
        key = _object_key(run_id, month)
        digest = _put_checked(client, key, _encode(rows))
        EventArchive.objects.update_or_create(
            run_id=run_id, defaults={"run_month": month, "object_key": key, "sha256": digest,
                                     "events": len(rows), "archived_at": clock.now(),
                                     "restored_at": None})
    _ANY.update(at=0.0)
    return len(runs)


def _any_archived() -> bool:
    """Return whether any run is archived (asked at most once a minute per process)."""
    if time.monotonic() - _ANY["at"] > _ANY_TTL_S or not _ANY["at"]:
        _ANY.update(at=time.monotonic(), any=EventArchive.objects.exists())
    return _ANY["any"]


def archived_events_restore(run_id: Any) -> int:
    """Write an archived run's events back into the event table; return how many (0: none).

    Called by the readers of a run's log (replay, the run page, the export, the API) when it
    may be empty. The archive row is locked while the events are written, so two readers
    restore once.
    """
    if not _any_archived():
        return 0
    pending = EventArchive.objects.filter(run_id=run_id, restored_at__isnull=True)
    if not pending.exists():  # one indexed read; the lock below only for a run to restore
        return 0
    with transaction.atomic():
        entry = (EventArchive.objects.select_for_update()
                 .filter(run_id=run_id, restored_at__isnull=True).first())
        if entry is None or Event.objects.filter(run_id=run_id,
                                                 run_month=entry.run_month).exists():
            return 0
        rows = _fetch_checked(entry)
        Event.objects.bulk_create(
            [Event(run_id=run_id, run_month=entry.run_month, **row) for row in rows],
            batch_size=1000)
        entry.restored_at = clock.now()
        entry.save(update_fields=["restored_at"])
    return len(rows)


def _fetch_checked(entry: EventArchive) -> list[dict[str, Any]]:
    try:
        body = _client().get_object(Bucket=settings.AGENTOPS_ARCHIVE_S3_BUCKET,
                                    Key=entry.object_key)["Body"].read()
    except _store_errors() as exc:
        raise ArchiveError(f"archive store: reading {entry.object_key} failed: {exc}") from exc
    if hashlib.sha256(body).hexdigest() != entry.sha256:
        raise ArchiveError(f"archive store: {entry.object_key} does not match the digest "
                           "recorded when it was archived")
    rows = [json.loads(line) for line in gzip.decompress(body).decode().splitlines() if line]
    for row in rows:
        row["at"] = dt.datetime.fromisoformat(row["at"])
    return rows


def archived_restored_forget(cutoff: dt.datetime) -> int:
    """Delete the read-back logs of archived runs read back before ``cutoff``; return how many runs.

    Only a log still exactly as archived goes (the run is terminal and has no event after
    the archived ones): the object in the store stays, and the next read fetches it again.
    """
    terminal = [s.value for s in TERMINAL]
    forgotten = 0
    for entry in EventArchive.objects.filter(restored_at__lt=cutoff).iterator():
        with transaction.atomic():
            run = Run.objects.select_for_update().filter(pk=entry.run_id).first()
            if run is None or run.status not in terminal or run.last_seq != entry.events:
                continue
            Event.objects.filter(run_id=entry.run_id, run_month=entry.run_month).delete()
            EventArchive.objects.filter(pk=entry.pk).update(restored_at=None)
        forgotten += 1
    return forgotten
