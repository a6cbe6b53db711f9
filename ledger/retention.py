"""Retention: prune the history of long-finished runs and artifacts nothing points to.

For a terminal run finished before the cutoff, events and snapshots up to its latest snapshot
are deleted; the latest snapshot and any events after it stay, so ``load_state`` still returns
the run's final state and the console can show it. Runs without a snapshot keep every event.
Ledger rows (ToolCall, ToolAttempt), approvals and the audit log are never pruned.
"""
from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.core.files.storage import storages
from django.db import transaction
from django.db.models import Exists, OuterRef, Subquery

from agentops import clock
from ledger.artifacts import _path as artifact_path
from ledger.models import Artifact, ToolAttempt, ToolCall
from runs.models import Event, Run, Snapshot
from runs.statuses import TERMINAL

log = logging.getLogger(__name__)

_BATCH = 500


def events_prune(*, older_than_days: int, dry_run: bool) -> dict[str, Any]:
    """Delete old history of terminal runs and unreferenced artifacts; return the counts."""
    if older_than_days < 1:
        raise ValueError("older_than_days must be at least 1")
    cutoff = clock.now() - dt.timedelta(days=older_than_days)
    counts = {"cutoff": cutoff.isoformat(), "dry_run": dry_run, "runs": 0, "events": 0,
              "snapshots": 0, "artifacts": 0, "artifact_bytes": 0}
    for run_ids in _run_batches(cutoff):
        runs, events, snapshots = _prune_runs(run_ids, dry_run=dry_run)
        counts["runs"] += runs
        counts["events"] += events
        counts["snapshots"] += snapshots
    artifacts, size = _prune_artifacts(cutoff, dry_run=dry_run)
    counts["artifacts"], counts["artifact_bytes"] = artifacts, size
    return counts


def _run_batches(cutoff: dt.datetime):
    """Yield lists of ids of prunable runs (terminal, finished before the cutoff, snapshotted)."""
    prunable = (
        Run.objects.filter(status__in=[s.value for s in TERMINAL], finished_at__lt=cutoff)
        .filter(Exists(Snapshot.objects.filter(run=OuterRef("pk"))))
        .order_by("pk")
    )
    after = None
    while True:
        # Keyset pages, not one open cursor: deletes happen between the pages.
        page = prunable if after is None else prunable.filter(pk__gt=after)
        batch = list(page.values_list("pk", flat=True)[:_BATCH])
        if not batch:
            return
        yield batch
        after = batch[-1]


def _latest_snapshot_seq():
    return Subquery(
        Snapshot.objects.filter(run_id=OuterRef("run_id")).order_by("-seq").values("seq")[:1]
    )


def _prune_runs(run_ids: list[Any], *, dry_run: bool) -> tuple[int, int, int]:
    """Delete (or count) each run's events and snapshots before its latest snapshot."""
    events = Event.objects.filter(run_id__in=run_ids, seq__lte=_latest_snapshot_seq())
    snapshots = Snapshot.objects.filter(run_id__in=run_ids, seq__lt=_latest_snapshot_seq())
    touched = set(events.values_list("run_id", flat=True).distinct())
    touched |= set(snapshots.values_list("run_id", flat=True).distinct())
    if dry_run:
        return len(touched), events.count(), snapshots.count()
    with transaction.atomic():
        n_events = events.delete()[0]
        n_snaps = snapshots.delete()[0]
    return len(touched), n_events, n_snaps


def _unreferenced_artifacts(cutoff: dt.datetime):
    used_by_calls = ToolCall.objects.filter(artifact_sha256=OuterRef("sha256"))
    used_by_attempts = ToolAttempt.objects.filter(log_sha256=OuterRef("sha256"))
    return (
        Artifact.objects.filter(created_at__lt=cutoff)
        .exclude(Exists(used_by_calls))
        .exclude(Exists(used_by_attempts))
    )


def _prune_artifacts(cutoff: dt.datetime, *, dry_run: bool) -> tuple[int, int]:
    """Delete (or count) artifacts older than the cutoff that no ledger row references."""
    rows = list(_unreferenced_artifacts(cutoff).values_list("sha256", "size"))
    if dry_run or not rows:
        return len(rows), sum(size for _, size in rows)
    storage = storages["artifacts"]
    deleted, size = 0, 0
    for sha, nbytes in rows:
        # Re-check inside the delete: a worker may have referenced it since the listing.
        with transaction.atomic():
            gone = _unreferenced_artifacts(cutoff).filter(sha256=sha).delete()[0]
        if not gone:
            continue
        deleted, size = deleted + 1, size + nbytes
        try:
            storage.delete(artifact_path(sha))
        except OSError:
            log.warning("artifact %s: row deleted but its file could not be removed", sha,
                        exc_info=True)
    return deleted, size
