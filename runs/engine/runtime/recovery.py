"""Recovery: runs whose worker died (lease expired) go back to the queue, up to a limit."""
from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import connection, transaction

from agentops import clock
from agentops.causes import RECOVERY
from runs.engine.core import reducer
from runs.engine.runtime import telemetry, trace_spans
from runs.engine.runtime.attention import attention_fields, block_reason
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.queue import run_enqueue
from runs.engine.runtime.snapshots import load_state
from runs.engine.runtime.stragglers import stragglers_close
from runs.engine.runtime.transition import run_transition
from runs.errors import IllegalTransition, UnknownSchemaVersion
from runs.event_types import EventType
from runs.models import Run
from runs.pooler import owners_judged
from runs.statuses import RunStatus


def runs_recover_expired(*, limit: int = 100) -> list[Any]:
    """Re-queue runs whose lease expired (counting a recovery); return their ids.

    Safe on every worker at once: each run is locked and re-checked, and only one sweeper
    moves it. Past its recovery limit a run is blocked instead.
    """
    ids = list(
        Run.objects.filter(status=RunStatus.RUNNING, lease_expires_at__lt=clock.now())
        .values_list("pk", flat=True)[:limit]
    )
    recovered = []
    for run_id in ids:
        if _recover_one(run_id):
            recovered.append(run_id)
    return recovered


def runs_recover_dead_owners(*, limit: int = 100) -> list[Any]:
    """Re-queue at once the runs whose lease owner's process is gone; return their ids.

    Release on death: a worker names its PostgreSQL sessions after itself (``host:pid``,
    runs.apps), so a killed worker's sessions vanish with it and its runs need not wait for
    their leases to expire. A paused worker keeps its sessions: its runs wait out the TTL.
    Only owners named like workers are judged; on other databases this does nothing, nor
    behind a transaction pooler without a direct URL (runs.pooler: no session there is a
    worker's own, so runs wait out their TTL).
    """
    if connection.vendor != "postgresql" or not owners_judged():
        return []
    with connection.cursor() as cur:
        cur.execute(_DEAD_OWNERS_SQL, [RunStatus.RUNNING, limit])
        rows = cur.fetchall()
    recovered = []
    for run_id, owner in rows:
        if _recover_one(run_id, dead_owner=owner):
            recovered.append(run_id)
    return recovered


# application_name holds at most 63 bytes: compare the owner's first 63 characters.
_DEAD_OWNERS_SQL = (
    "SELECT id, lease_owner FROM runs_run WHERE status = %s AND lease_owner ~ ':[0-9]+$' "
    "AND left(lease_owner, 63) NOT IN (SELECT application_name FROM pg_stat_activity "
    "WHERE application_name <> '') LIMIT %s")


def _recover_one(run_id: Any, *, dead_owner: str = "") -> bool:
    with transaction.atomic():
        run = Run.objects.select_for_update(skip_locked=True).filter(pk=run_id).first()
        # skip_locked: another sweeper holds this run right now and will handle it.
        if run is None or run.status != RunStatus.RUNNING:
            return False
        if dead_owner:
            if run.lease_owner != dead_owner:
                return False  # claimed again since the sweep looked
        elif run.lease_expires_at is None or run.lease_expires_at >= clock.now():
            return False
        count, owner = run.recoveries + 1, run.lease_owner
        event = _recovered_event(run_id, count, owner, dead_owner)
        try:
            if count > run.recovery_limit:
                detail = (f"the run lost its worker {count} times (limit {run.recovery_limit}); "
                          f"last owner {run.lease_owner}")
                fields = attention_fields(run=run, category="recovery_limit", detail=detail,
                                          state=_state_or_empty(run))
                # Nobody holds it now: what its lost workers left in flight is closed.
                stragglers_close(run, why=f"the run was blocked ({detail})", ended=False,
                                 cause="worker_lost")
                run_transition(run, RunStatus.BLOCKED, reason=block_reason("recovery_limit"),
                               detail=detail, events=[event],
                               fields={**fields, "recoveries": count},
                               expected_version=run.version)
                telemetry.run_recovered(run, count, owner, blocked=True)
                return False
            # urgent: it lost its turn mid-slice; busy workers yield to it (runs.engine.runtime.loop).
            run_transition(run, RunStatus.QUEUED, reason="recovered", events=[event],
                           fields={"recoveries": count, "urgent": True},
                           expected_version=run.version)
            telemetry.run_recovered(run, count, owner, blocked=False)
        except IllegalTransition:
            return False

    run_enqueue(run_id)
    return True


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
        return load_state(run.pk)
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
