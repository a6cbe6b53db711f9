"""Retention: old history of finished runs and unreferenced artifacts are pruned safely."""
from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.core.files.storage import storages
from django.core.management import call_command

from agentops import clock
from agentops.management.commands.agentops_prune import Command as PruneCommand
from ledger.artifacts import _path as artifact_path
from ledger.artifacts import artifact_put
from ledger.models import Artifact, ToolAttempt, ToolCall
from ledger.retention import events_prune
from runs.engine.runtime.events import NewEvent, event_append
from runs.engine.runtime.snapshots import load_state, snapshot_build
from runs.models import Event, Run, Snapshot
from runs.statuses import RunStatus
from tests.factories import make_run

pytestmark = pytest.mark.django_db

OLD = dt.timedelta(days=40)


def _history(*, status: str, ended_ago: dt.timedelta | None, snapshots: bool = True) -> Run:
    """A run with 7 events and snapshots at seq 3 and 5 (when ``snapshots``)."""
    run = make_run(plan=[{"key": "a", "title": "a"}, {"key": "b", "title": "b"}])
    for i, (kind, data) in enumerate([
        ("step.started", {"step": "a"}), ("step.completed", {"step": "a", "output": {"n": 1}}),
        ("step.started", {"step": "b"}), ("run.note", {"text": "half way"}),
        ("step.completed", {"step": "b", "output": {"n": 2}}), ("run.note", {"text": "done"}),
    ], start=2):
        run.refresh_from_db()
        event_append(run=run, events=[NewEvent(kind, data)])
        if snapshots and i in (3, 5):
            snapshot_build(run_id=run.pk, state=load_state(run.pk), phase="step_complete",
                           agent_version="1").save()
    finished = clock.now() - ended_ago if ended_ago else None
    Run.objects.filter(pk=run.pk).update(status=status, finished_at=finished)
    return run


def _old_artifact(data: bytes) -> str:
    sha = artifact_put(data)
    Artifact.objects.filter(sha256=sha).update(created_at=clock.now() - OLD)
    return sha


def test_an_old_finished_run_keeps_its_latest_snapshot_and_final_state():
    run = _history(status=RunStatus.SUCCEEDED, ended_ago=OLD)
    final = load_state(run.pk)
    counts = events_prune(older_than_days=30, dry_run=False)
    assert (counts["runs"], counts["events"], counts["snapshots"]) == (1, 5, 1)
    assert list(Snapshot.objects.filter(run=run).values_list("seq", flat=True)) == [5]
    assert list(Event.objects.filter(run=run).values_list("seq", flat=True)) == [6, 7]
    assert load_state(run.pk) == final


def test_live_recent_and_unsnapshotted_runs_are_untouched():
    runs = [
        _history(status=RunStatus.BLOCKED, ended_ago=None),
        _history(status=RunStatus.FAILED, ended_ago=dt.timedelta(days=2)),
        _history(status=RunStatus.CANCELLED, ended_ago=OLD, snapshots=False),
    ]
    Run.objects.filter(pk=runs[0].pk).update(updated_at=clock.now() - OLD)
    counts = events_prune(older_than_days=30, dry_run=False)
    assert (counts["runs"], counts["events"], counts["snapshots"]) == (0, 0, 0)
    assert Event.objects.count() == 21


def test_a_second_prune_finds_nothing_more():
    _history(status=RunStatus.SUCCEEDED, ended_ago=OLD)
    events_prune(older_than_days=30, dry_run=False)
    again = events_prune(older_than_days=30, dry_run=False)
    assert (again["runs"], again["events"], again["snapshots"]) == (0, 0, 0)


def test_only_old_unreferenced_artifacts_are_deleted():
    run = _history(status=RunStatus.SUCCEEDED, ended_ago=OLD)
    orphan = _old_artifact(b"nobody points here")
    result = _old_artifact(b"a tool result")
    log = _old_artifact(b"an attempt log")
    fresh = artifact_put(b"made today, not referenced yet")
    call = ToolCall.objects.create(tool_call_id="tc_r", run=run, step_key="a", turn=1,
                                   tool="fetch", args_hash="h", idempotency_key="k",
                                   artifact_sha256=result)
    ToolAttempt.objects.create(tool_call=call, attempt=1, status="succeeded", log_sha256=log,
                               started_at=clock.now())
    counts = events_prune(older_than_days=30, dry_run=False)
    assert counts["artifacts"] == 1 and counts["artifact_bytes"] == len(b"nobody points here")
    assert set(Artifact.objects.values_list("sha256", flat=True)) == {result, log, fresh}
    storage = storages["artifacts"]
    assert not storage.exists(artifact_path(orphan))
    assert all(storage.exists(artifact_path(sha)) for sha in (result, log, fresh))


def test_dry_run_counts_what_would_go_and_deletes_nothing():
    _history(status=RunStatus.SUCCEEDED, ended_ago=OLD)
    _old_artifact(b"orphan")
    counts = events_prune(older_than_days=30, dry_run=True)
    assert counts["dry_run"] is True
    assert (counts["runs"], counts["events"], counts["snapshots"], counts["artifacts"]) == (
        1, 5, 1, 1)
    assert Event.objects.count() == 7 and Snapshot.objects.count() == 2
    assert Artifact.objects.count() == 1


def test_the_command_prints_counts_and_honours_dry_run():
    _history(status=RunStatus.SUCCEEDED, ended_ago=OLD)
    out = StringIO()
    call_command(PruneCommand(), "--older-than-days", "30", "--dry-run", stdout=out)
    assert out.getvalue().startswith("Would delete 5 events and 1 snapshots of 1 runs")
    assert Event.objects.count() == 7
    out = StringIO()
    call_command(PruneCommand(), "--older-than-days", "30", stdout=out)
    assert out.getvalue().startswith("Deleted 5 events and 1 snapshots of 1 runs")
    assert Event.objects.count() == 2


def test_a_zero_day_window_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        events_prune(older_than_days=0, dry_run=True)
