"""The event table's monthly partitions on PostgreSQL: made ahead, listed, dropped whole.

Every event carries its run's creation month (runs.models.event), so a run's whole log sits
in one partition ``runs_event_pYYYYMM``; a run created in a month without one lands in
``runs_event_default`` and moves into its partition when that is made. Retention drops a
partition once every run in it ended before the cutoff (after archiving it, runs.event_archive);
a live run in it makes the drop refuse. On SQLite the table is one plain table: nothing here
applies (``partitioned()`` is false).
"""
from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction

from agentops import clock
from agentops.errors import AgentOpsError
from runs.event_archive import archive_partition, archived_restored_forget
from runs.models import Run
from runs.statuses import TERMINAL

log = logging.getLogger(__name__)

DEFAULT = "runs_event_default"
_ENSURED = {"at": 0.0}
_ENSURE_EVERY_S = 3600.0


class PartitionRefused(AgentOpsError):
    """A partition cannot be dropped: runs in it are live or ended after the cutoff."""


@dataclass(frozen=True)
class Partition:
    """One monthly partition of the event table: runs created in [start, end)."""

    name: str
    start: dt.date
    end: dt.date


def month_after(month: dt.date) -> dt.date:
    """Return the first day of the month after ``month``."""
    return (month.replace(day=1) + dt.timedelta(days=32)).replace(day=1)


def partitioned() -> bool:
    """Return whether the event table is a partitioned table (PostgreSQL after migration 0018)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = 'runs_event'::regclass")
        return cursor.fetchone()[0] == "p"


def partitions_list() -> list[Partition]:
    """Return the monthly partitions (not the default one), oldest first."""
    if not partitioned():
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'runs_event'::regclass AND c.relname <> %s ORDER BY 1",
            [DEFAULT])
        names = [row[0] for row in cursor.fetchall()]
    out = []
    for name in names:
        start = dt.date(int(name[-6:-2]), int(name[-2:]), 1)
        out.append(Partition(name, start, month_after(start)))
    return out


def partitions_ensure(*, ahead: int | None = None) -> list[str]:
    """Make the partitions from this month to ``ahead`` months on; return the names made.

    Rows already in the default partition for such a month (a run created when it had no
    partition) move into the new one in the same transaction.
    """
    if not partitioned():
        return []
    ahead = settings.AGENTOPS_EVENT_PARTITIONS_AHEAD if ahead is None else ahead
    have = {p.start for p in partitions_list()}
    month, made = clock.now().astimezone(dt.timezone.utc).date().replace(day=1), []
    for _ in range(ahead + 1):
        if month not in have:
            partition_make(month)
            made.append(_name(month))
        month = month_after(month)
    return made


def _name(month: dt.date) -> str:
    return f"runs_event_p{month:%Y%m}"


def partition_make(month: dt.date) -> None:
    """Make ``month``'s partition, moving its rows out of the default partition."""
    name, lo, hi = _name(month), month.isoformat(), month_after(month).isoformat()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE {name} (LIKE runs_event INCLUDING DEFAULTS "
                       "INCLUDING CONSTRAINTS)")
        cursor.execute(f"WITH moved AS (DELETE FROM {DEFAULT} WHERE run_month >= %s "
                       f"AND run_month < %s RETURNING *) INSERT INTO {name} SELECT * FROM moved",
                       [lo, hi])
        if cursor.rowcount:
            log.warning("moved %d events of %s from the default partition", cursor.rowcount,
                        month)
        cursor.execute(f"ALTER TABLE runs_event ATTACH PARTITION {name} "
                       f"FOR VALUES FROM ('{lo}') TO ('{hi}')")


def partitions_ensure_due() -> list[str]:
    """The sweeper's part: make partitions ahead, at most once an hour in this process."""
    if time.monotonic() - _ENSURED["at"] < _ENSURE_EVERY_S and _ENSURED["at"]:
        return []
    made = partitions_ensure()
    _ENSURED["at"] = time.monotonic()
    return made


def partition_check(part: Partition, cutoff: dt.datetime) -> None:
    """Raise PartitionRefused unless every run of ``part`` is terminal and ended before cutoff."""
    runs = Run.objects.filter(created_at__gte=_midnight(part.start),
                              created_at__lt=_midnight(part.end))
    live = runs.exclude(status__in=[s.value for s in TERMINAL]).count()
    late = runs.filter(status__in=[s.value for s in TERMINAL]).exclude(
        finished_at__lt=cutoff).count()
    if live or late:
        raise PartitionRefused(
            f"partition {part.name}: {live} runs not finished and {late} finished after "
            f"{cutoff:%Y-%m-%d}; nothing was dropped")


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), tzinfo=dt.timezone.utc)


def partitions_drop(*, older_than_days: int, archive: bool, dry_run: bool) -> list[dict]:
    """Drop (after archiving, when asked) every partition whose runs all ended long ago.

    Partitions are taken oldest first; the first one refused (a live run) stops the walk and
    is reported, so history is always dropped from the oldest end. Returns one line per
    partition: name, runs archived, whether dropped, and why not.
    """
    if older_than_days < 1:
        raise ValueError("older_than_days must be at least 1")
    cutoff = clock.now() - dt.timedelta(days=older_than_days)
    done: list[dict] = []
    for part in partitions_list():
        if part.end > cutoff.astimezone(dt.timezone.utc).date():
            break  # runs of this month may have ended after the cutoff: not due yet
        try:
            archived = _partition_retire(part, cutoff, archive=archive, dry_run=dry_run)
        except PartitionRefused as exc:
            done.append({"partition": part.name, "dropped": False, "reason": str(exc),
                         "archived": 0})
            break
        done.append({"partition": part.name, "dropped": not dry_run, "reason": "",
                     "archived": archived})
    if not dry_run:
        archived_restored_forget(cutoff)  # archived logs read back long ago: out again
    return done


def _partition_retire(part: Partition, cutoff: dt.datetime, *, archive: bool,
                      dry_run: bool) -> int:
    """Check, archive (when asked) and drop one partition in one transaction; return runs archived.

    The partition is locked against writes first, so no event lands in it between the check,
    the archive and the drop (a run retried meanwhile waits, then fails the check).
    """
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {part.name} IN SHARE MODE")
        partition_check(part, cutoff)
        if dry_run:
            return 0
        archived = archive_partition(part.name) if archive else 0
        cursor.execute(f"ALTER TABLE runs_event DETACH PARTITION {part.name}")
        cursor.execute(f"DROP TABLE {part.name}")
    return archived
