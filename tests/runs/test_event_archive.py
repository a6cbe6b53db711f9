"""Archived partitions: a dropped partition's runs go to a real S3 server (moto's, over HTTP on
loopback) checked, and an archived run still opens in the console, replays and exports."""
from __future__ import annotations

import datetime as dt
import json
from io import StringIO

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import connection
from django.test import Client

from agentops.llm.scripted import call, say
from approvals.apikeys import apikey_create
from runs import event_archive
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.event_archive import ArchiveError, archived_events_restore
from runs.models import Event, EventArchive, Run
from runs.models.event import run_month
from runs.partitions import partition_make
from runs.services import run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db
BUCKET = "agentops-archive-test"
OLD = dt.datetime(2024, 3, 10, 12, tzinfo=dt.timezone.utc)


@pytest.fixture(scope="module")
def s3_server():
    """A real S3 HTTP server (moto's) on a free loopback port, for this module."""
    server_mod = pytest.importorskip("moto.server")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def store(s3_server, settings, monkeypatch):
    """The archive settings pointing at the test server, with a fresh bucket."""
    if connection.vendor != "postgresql":
        pytest.skip("partitions (and so archives of them) are PostgreSQL's")
    for name, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    settings.AGENTOPS_ARCHIVE_S3_BUCKET = BUCKET
    settings.AGENTOPS_ARCHIVE_S3_ENDPOINT_URL = s3_server
    client = event_archive._client()
    client.create_bucket(Bucket=BUCKET)
    event_archive._ANY.update(at=0.0)
    yield client
    for obj in client.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        client.delete_object(Bucket=BUCKET, Key=obj["Key"])
    client.delete_bucket(Bucket=BUCKET)
    event_archive._ANY.update(at=0.0)


@pytest.fixture
def old_run(engine):
    """A run driven to success, then moved to March 2024 (its events to that partition)."""
    if connection.vendor != "postgresql":
        pytest.skip("partitions (and so archives of them) are PostgreSQL's")
    engine.make_agent("archived", {"quote": [call("lookup", item="book"), say("quoted")]},
                      plan=["quote"])
    run = run_start(agent="archived", goal="sell a book", input={})
    assert drive(run) == "succeeded"
    partition_make(run_month(OLD))
    Run.objects.filter(pk=run.pk).update(created_at=OLD, finished_at=OLD + dt.timedelta(hours=1))
    Event.objects.filter(run_id=run.pk).update(run_month=run_month(OLD))
    run.refresh_from_db()
    return run


def _drop_archiving() -> str:
    out = StringIO()
    call_command("agentops_partitions", "drop", "--older-than-days", "30", "--archive",
                 stdout=out)
    return out.getvalue()


def _viewer_client() -> Client:
    user = User.objects.create_user(username="reader", password="pw-for-tests-only")
    user.groups.add(Group.objects.get(name="viewers"))
    client = Client()
    client.force_login(user)
    return client


def test_an_archived_run_opens_replays_and_exports(store, old_run, tmp_path):
    state, events = replay_state(old_run.pk), Event.objects.filter(run=old_run).count()
    assert "runs_event_p202403: dropped (1 runs archived)" in _drop_archiving()
    assert not Event.objects.filter(run=old_run).exists()
    entry = EventArchive.objects.get(run_id=old_run.pk)
    assert entry.events == events and entry.object_key.endswith(f"2024-03/{old_run.pk}.jsonl.gz")
    assert store.head_object(Bucket=BUCKET, Key=entry.object_key)["ContentLength"] > 0
    # The console's run page reads the log back from the store.
    page = _viewer_client().get(f"/runs/{old_run.pk}/")
    assert page.status_code == 200 and b"run.created" in page.content
    assert Event.objects.filter(run=old_run).count() == events
    assert replay_state(old_run.pk) == state
    out = tmp_path / "cp"
    call_command("agentops", "export", str(old_run.pk), str(out), stdout=StringIO())
    assert json.loads((out / "meta.json").read_text())["seq"] == old_run.last_seq


def test_the_events_api_reads_an_archived_log_back(store, old_run):
    events = Event.objects.filter(run=old_run).count()
    _drop_archiving()
    user = User.objects.create_user(username="api-reader", password="pw-for-tests-only")
    user.groups.add(Group.objects.get(name="viewers"))
    _, key = apikey_create(user=user, name="tests")
    page = Client(headers={"Authorization": f"Bearer {key}"}).get(
        f"/api/runs/{old_run.pk}/events", {"limit": 500})
    assert page.status_code == 200, page.content
    assert [e["seq"] for e in page.json()["items"]] == list(range(1, events + 1))


def test_replay_reads_an_archived_log_back_once(store, old_run):
    state = load_state(old_run.pk)
    _drop_archiving()
    assert load_state(old_run.pk) == state  # the worker's load path: snapshot + tail
    assert EventArchive.objects.get(run_id=old_run.pk).restored_at is not None
    assert archived_events_restore(old_run.pk) == 0  # already back: nothing read twice


def test_a_log_read_back_long_ago_goes_again_with_the_next_drop(store, old_run):
    _drop_archiving()
    state = replay_state(old_run.pk)
    entry = EventArchive.objects.get(run_id=old_run.pk)
    EventArchive.objects.filter(pk=entry.pk).update(restored_at=OLD)
    _drop_archiving()
    assert not Event.objects.filter(run=old_run).exists()
    assert EventArchive.objects.get(pk=entry.pk).restored_at is None
    assert replay_state(old_run.pk) == state  # read back again from the store


def test_an_object_changed_in_the_store_is_refused(store, old_run):
    _drop_archiving()
    entry = EventArchive.objects.get(run_id=old_run.pk)
    store.put_object(Bucket=BUCKET, Key=entry.object_key, Body=b"not the archived bytes")
    with pytest.raises(ArchiveError, match="does not match the digest"):
        replay_state(old_run.pk)
    assert not Event.objects.filter(run=old_run).exists()


def test_without_a_store_the_archiving_drop_keeps_the_partition(old_run, settings):
    settings.AGENTOPS_ARCHIVE_S3_BUCKET = ""
    with pytest.raises(Exception, match="AGENTOPS_ARCHIVE_S3_BUCKET"):
        _drop_archiving()
    assert Event.objects.filter(run=old_run).exists()


def test_a_log_read_back_lands_in_its_months_partition_when_that_is_there_again(store, old_run):
    state = replay_state(old_run.pk)
    _drop_archiving()
    partition_make(run_month(OLD))  # the month made again (by hand, or an import of old runs)
    assert replay_state(old_run) == state  # read back through the Run: its month only
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT tableoid::regclass::text FROM runs_event "
                       "WHERE run_id = %s", [old_run.pk])
        assert [row[0] for row in cursor.fetchall()] == ["runs_event_p202403"]
