"""Recovery: runs whose worker died (lease expired) go back to the queue, up to a limit."""
from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Min, Q

from agentops import clock
from agentops.causes import RECOVERY
from agentops.redaction import configured_secrets
from runs.engine.core import reducer
from runs.engine.runtime import telemetry, trace_spans
from runs.engine.runtime.attention import attention_fields, block_reason
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.queue import enqueue_tick, run_enqueue
from runs.engine.runtime.snapshots import load_state
from runs.engine.runtime.stragglers import stragglers_close
from runs.engine.runtime.transition import run_transition
from runs.errors import IllegalTransition, UnknownSchemaVersion
from runs.event_types import EventType
from runs.handoff import handoff_announce
from runs.models import Run
from runs.pooler import owners_judged, pooled
from runs.statuses import RunStatus

log = logging.getLogger("agentops.recovery")


def runs_recover_expired(*, limit: int = 100, now: dt.datetime | None = None) -> list[Any]:
    """Re-queue runs whose lease expired before ``now`` (default: now), counting a recovery;
    return their ids.

    Safe on every worker at once: each run is locked and re-checked, and only one sweeper
    moves it. Past its recovery limit a run is blocked instead. A run whose row its silent
    owner still locks (paused inside a transaction) is freed first (``holders_end``).
    """
    ids = list(
        Run.objects.filter(status=RunStatus.RUNNING, lease_expires_at__lt=now or clock.now())
        .values_list("pk", flat=True)[:limit]
    )
    recovered = _recover_all(dict.fromkeys(ids, ""))
    left = [run_id for run_id in ids if run_id not in recovered]
    if left and holders_end(left):
        recovered += _recover_all(dict.fromkeys(left, ""))
    return recovered


def holders_end(run_ids: list[Any]) -> int:
    """End the sessions of silent owners that sit inside a transaction; return how many.

    A worker paused (SIGSTOP, a frozen VM) between two statements of a transaction keeps
    its row locks: the sweep skips the locked run (``skip_locked``) until PostgreSQL's
    ``idle_in_transaction_session_timeout`` ends that session, seconds after its lease
    expired. Here a session named after the owner of one of ``run_ids`` whose lease has
    expired, idle inside a transaction for over a third of the TTL, is terminated: its
    transaction rolls back (nothing it did commits), its locks go, and a worker that
    wakes finds its connection gone and its run fenced (version and owner checked).
    PostgreSQL only, and not behind a transaction pooler (a server connection there
    carries whichever client's name; PgBouncer's ``idle_transaction_timeout`` does it).
    A role that may not signal those sessions leaves them to the timeout.
    """
    if connection.vendor != "postgresql" or pooled() or not run_ids:
        return 0
    idle_s = settings.AGENTOPS_LEASE_TTL_S / 3
    try:
        with connection.cursor() as cur:
            cur.execute(_HOLDERS_END_SQL, [RunStatus.RUNNING, list(run_ids), clock.now(), idle_s])
            return sum(1 for (ended,) in cur.fetchall() if ended)
    except DatabaseError as exc:  # e.g. not allowed to signal them: the timeout does it
        log.warning("could not end the sessions holding expired runs %s: %s", run_ids, exc)
        return 0


# pg_terminate_backend waits (up to 1 s) for the session to end, so its locks are gone.
_HOLDERS_END_SQL = (
    "SELECT pg_terminate_backend(pid, 1000) FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
    "AND state LIKE 'idle in transaction%%' AND application_name IN ("
    "SELECT left(lease_owner, 63) FROM runs_run WHERE status = %s AND id = ANY(%s) "
    "AND lease_owner <> '' AND lease_expires_at < %s) "
    "AND state_change < now() - make_interval(secs => %s)")


def lease_next_expiry(*, now: dt.datetime) -> tuple[dt.datetime | None, bool]:
    """Return when the first lease of a running run expires at or after ``now`` (None: none
    does), and whether some lease expired before ``now`` (a run not recovered yet: e.g. locked).

    One read of the running runs (the ``status`` prefix of ``run_status_updated``: bounded by
    the runs in flight). The expiry has no index of its own, so a lease renewal, which
    changes nothing else, updates the row in place (HOT) instead of writing an entry into
    every index of the run table. Renewals and new claims only ever set an expiry at least
    two thirds of the TTL ahead, so nothing expires before it.
    """
    if connection.vendor == "postgresql":  # read once a second by every host: no ORM
        with connection.cursor() as cur:
            cur.execute(_NEXT_EXPIRY_SQL, [now, RunStatus.RUNNING])
            first, after = cur.fetchone()
    else:
        found = Run.objects.filter(status=RunStatus.RUNNING).aggregate(
            first=Min("lease_expires_at"),
            next=Min("lease_expires_at", filter=Q(lease_expires_at__gte=now)))
        first, after = found["first"], found["next"]
    return after, first is not None and first < now


_NEXT_EXPIRY_SQL = ("SELECT min(lease_expires_at), min(lease_expires_at) FILTER "
                    "(WHERE lease_expires_at >= %s) FROM runs_run WHERE status = %s")


def runs_recovered_reserve(*, limit: int) -> list[Any]:
    """Reserve up to ``limit`` recovered runs waiting in the queue (oldest first) for the
    caller's free run slots; return their ids.

    One statement: the runs' ``urgent`` mark is cleared, so two processes never reserve the
    same run, and nobody yields to a run about to be claimed. The run stays queued with its
    q2 tick: if the caller dies before claiming it, that tick starts it. PostgreSQL only
    (run slots are): elsewhere nothing is reserved.
    """
    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cur:
        cur.execute(_RESERVE_SQL, [RunStatus.QUEUED, limit])
        return [row[0] for row in cur.fetchall()]


# skip_locked: a run locked now is being claimed or recovered; the next look takes it.
_RESERVE_SQL = (
    "UPDATE runs_run SET urgent = false WHERE id IN (SELECT id FROM runs_run "
    "WHERE status = %s AND urgent ORDER BY updated_at LIMIT %s FOR UPDATE SKIP LOCKED) "
    "RETURNING id")


def runs_recover_dead_owners(*, limit: int = 100, only: set[str] | None = None) -> list[Any]:
    """Re-queue at once the runs whose lease owner's process is gone; return their ids.

    Release on death: a worker names its PostgreSQL sessions after itself (``host:pid``,
    runs.apps), so a killed worker's sessions vanish with it and its runs need not wait for
    their leases to expire. A paused worker keeps its sessions: its runs wait out the TTL.
    Only owners named like workers are judged; on other databases this does nothing, nor
    behind a transaction pooler without a direct URL (runs.pooler: no session there is a
    worker's own, so runs wait out their TTL). ``only``: judge just these owners' names
    (the recoverer's after an outage), None for all.
    """
    if connection.vendor != "postgresql" or not owners_judged() or only == set():
        return []
    names = None if only is None else sorted(only)
    with connection.cursor() as cur:
        cur.execute(_DEAD_OWNERS_SQL, [RunStatus.RUNNING, names, names, limit])
        rows = cur.fetchall()
    return _recover_all(dict(rows))


# application_name holds at most 63 bytes: compare the owner's first 63 characters. The
# names judged: all (NULL) or just those given.
_DEAD_OWNERS_SQL = (
    "SELECT id, lease_owner FROM runs_run WHERE status = %s AND lease_owner ~ ':[0-9]+$' "
    "AND (%s::text[] IS NULL OR left(lease_owner, 63) = ANY(%s::text[])) "
    "AND left(lease_owner, 63) NOT IN (SELECT application_name FROM pg_stat_activity "
    "WHERE application_name <> '') LIMIT %s")


_CHUNK = 5  # runs recovered per commit: see _recover_all


def _recover_all(owners: dict[Any, str]) -> list[Any]:
    """Recover the runs ``owners`` names (run id -> the dead owner, or "" for an expired
    lease), a few per transaction, each few enqueued at once; return the ids recovered.

    A dead worker leaves all its runs at once. One commit per run would make the last wait
    for all the others; one for them all would lock them all on one host, and none could
    start before the last was written. A few per commit: the first are on their way while
    the next are written, and the recoverers of other hosts, skipping the rows locked here,
    take the next few in parallel. A chunk that fails is done again run by run, so one bad
    run never holds the others back.
    """
    ids = list(owners)
    recovered: list[Any] = []
    for i in range(0, len(ids), _CHUNK):
        chunk = {run_id: owners[run_id] for run_id in ids[i:i + _CHUNK]}
        if len(chunk) == 1:
            done = [run_id for run_id, dead in chunk.items() if _recover_one(run_id, dead)]
        else:
            done = _recover_chunk_or_each(chunk)
        recovered += done
        if done:
            handoff_announce()  # this host's free slots start them now (runs.handoff)
    return recovered


def _recover_chunk_or_each(chunk: dict[Any, str]) -> list[Any]:
    """Recover ``chunk`` in one transaction; if that fails, run by run."""
    try:
        return _recover_chunk(chunk)
    except DatabaseError:
        log.exception("recovering %d runs at once failed: one by one instead", len(chunk))
        return [run_id for run_id, dead in chunk.items() if _recover_one(run_id, dead)]


def _recover_chunk(owners: dict[Any, str]) -> list[Any]:
    """Recover ``owners``' runs in one transaction, then enqueue their ticks in one more."""
    with transaction.atomic():
        # skip_locked: another recoverer holds these runs right now and will handle them.
        runs = Run.objects.select_for_update(skip_locked=True).filter(pk__in=list(owners))
        recovered = [run.pk for run in runs if _recover_locked(run, owners[run.pk])]
    if recovered:
        with transaction.atomic():
            for run_id in recovered:
                enqueue_tick(run_id)
    return recovered


def _recover_one(run_id: Any, dead_owner: str = "") -> bool:
    with transaction.atomic():
        run = Run.objects.select_for_update(skip_locked=True).filter(pk=run_id).first()
        # skip_locked: another sweeper holds this run right now and will handle it.
        if run is None or not _recover_locked(run, dead_owner):
            return False
    run_enqueue(run_id)
    return True


def _recover_locked(run: Run, dead_owner: str) -> bool:
    """Re-queue (or past its limit, block) ``run``, locked by the caller; True if re-queued."""
    if run.status != RunStatus.RUNNING:
        return False
    if dead_owner:
        if run.lease_owner != dead_owner:
            return False  # claimed again since the sweep looked
    elif run.lease_expires_at is None or run.lease_expires_at >= clock.now():
        return False
    count, owner = run.recoveries + 1, run.lease_owner
    event = _recovered_event(run.pk, count, owner, dead_owner)
    try:
        if count > run.recovery_limit:
            _block_at_limit(run, count, event)
            telemetry.run_recovered(run, count, owner, blocked=True)
            return False
        # urgent: it lost its turn mid-slice; busy workers yield to it (runs.engine.runtime.loop).
        # Only the configured secrets are scrubbed: nothing written here (counts, the lost
        # owner's host:pid, trace ids) comes from the run's sealed arguments, and reading
        # those costs a query a run while a lost worker's dozens of runs wait their turn.
        run_transition(run, RunStatus.QUEUED, reason="recovered", events=[event],
                       fields={"recoveries": count, "urgent": True},
                       expected_version=run.version, secrets=configured_secrets())
    except IllegalTransition:
        return False
    telemetry.run_recovered(run, count, owner, blocked=False)
    return True


def _block_at_limit(run: Run, count: int, event: NewEvent) -> None:
    """Block ``run``: it lost its worker more often than its recovery limit allows."""
    detail = (f"the run lost its worker {count} times (limit {run.recovery_limit}); "
              f"last owner {run.lease_owner}")
    fields = attention_fields(run=run, category="recovery_limit", detail=detail,
                              state=_state_or_empty(run))
    # Nobody holds it now: what its lost workers left in flight is closed.
    stragglers_close(run, why=f"the run was blocked ({detail})", ended=False,
                     cause="worker_lost")
    run_transition(run, RunStatus.BLOCKED, reason=block_reason("recovery_limit"),
                   detail=detail, events=[event], fields={**fields, "recoveries": count},
                   expected_version=run.version)


def _recovered_event(run_id: Any, count: int, owner: str, dead_owner: str) -> NewEvent:
    """Return run.recovered: a root of the run's causes (what the next worker does follows)."""
    return NewEvent(EventType.RUN_RECOVERED,
                    {"recoveries": count, "lost_owner": owner,
                     **trace_spans.recovery_marks(run_id, count),
                     "cause": "owner_gone" if dead_owner else "lease_expired"},
                    caused_by=f"{RECOVERY}:{owner}")


def _state_or_empty(run: Run) -> dict[str, Any]:
    """Return the run's state for its recommendation (progress); empty if it cannot load."""
    try:
        return load_state(run)
    except UnknownSchemaVersion:
        return reducer.empty_state()


STALE_QUEUED_S = 10.0


def runs_requeue_stale(*, older_than_s: float = STALE_QUEUED_S, limit: int = 100) -> list[Any]:
    """Enqueue again runs left ``queued`` longer than ``older_than_s``; return their ids.

    A worker killed after its queue took a tick (but before the tick claimed the run) loses
    that tick; the run itself is still queued and holds no lease. A second tick is harmless
    (the claim is a conditional UPDATE), so re-enqueueing is safe. Touching ``updated_at``
    with a conditional UPDATE makes one sweeper do it, and at most once per period.
    """
    now = clock.now()
    cutoff = now - dt.timedelta(seconds=older_than_s)
    ids = list(Run.objects.filter(status=RunStatus.QUEUED, updated_at__lt=cutoff)
               .values_list("pk", flat=True)[:limit])

    requeued = []
    for run_id in ids:
        touched = Run.objects.filter(pk=run_id, status=RunStatus.QUEUED,
                                     updated_at__lt=cutoff).update(updated_at=now)
        if touched:
            run_enqueue(run_id)
            requeued.append(run_id)
    return requeued
