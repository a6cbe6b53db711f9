"""event_append: dense seq, key dedup, O(event) writes, safe under concurrency."""
import threading

import pytest
from django.db import connection, connections

from runs.engine.runtime.events import NewEvent, event_append
from agentops.control import LeaseLost
from agentops.jsonstate import NotJSONSerializable
from runs.models import Event, Run


def test_seq_is_dense_and_projection_follows(run):
    event_append(run=run, events=[NewEvent("run.note", {"text": str(i)}) for i in range(3)])
    seqs = list(Event.objects.filter(run=run).values_list("seq", flat=True))
    assert seqs == [1, 2, 3, 4]
    assert Run.objects.get(pk=run.pk).last_seq == 4


def test_duplicate_key_returns_nothing_and_writes_nothing(run):
    first = event_append(run=run, events=[NewEvent("signal.received", {"name": "go"}, key="k1")])
    again = event_append(run=run, events=[NewEvent("signal.received", {"name": "go"}, key="k1")])
    assert len(first) == 1 and again == []
    assert Event.objects.filter(key="k1").count() == 1
    assert Run.objects.get(pk=run.pk).last_seq == 2


def test_duplicate_key_keeps_the_other_events_of_the_batch(run):
    event_append(run=run, events=[NewEvent("signal.received", {"name": "a"}, key="a")])
    written = event_append(
        run=run,
        events=[
            NewEvent("signal.received", {"name": "a"}, key="a"),
            NewEvent("signal.received", {"name": "b"}, key="b"),
        ],
    )
    assert [e.key for e in written] == ["b"]
    assert list(Event.objects.filter(run=run).values_list("seq", flat=True)) == [1, 2, 3]


def test_stale_version_is_lease_lost_and_writes_nothing(run):
    stale_version = run.version
    event_append(run=run, events=[NewEvent("run.note", {"text": "other writer"})])
    with pytest.raises(LeaseLost):
        event_append(run=run, events=[NewEvent("run.note", {"text": "x"})],
                     expected_version=stale_version)
    assert Event.objects.filter(run=run).count() == 2


def test_status_is_refused_outside_transition(run):
    with pytest.raises(ValueError, match="status"):
        event_append(run=run, events=[], fields={"status": "failed"})


def test_non_json_event_data_fails_at_once_with_the_path(run):
    import datetime as dt

    with pytest.raises(NotJSONSerializable, match=r"data\.a\.b\[1\] is a datetime"):
        NewEvent("run.note", {"a": {"b": [1, dt.datetime.now()]}})


def test_bytes_written_per_event_stay_flat_as_history_grows(run):
    """Each append sends only its delta: the 2,000th costs what the 10th did (SQL bytes)."""
    from django.test.utils import CaptureQueriesContext

    sizes = []
    for i in range(2000):
        message = f"message {i:05d} " + "x" * 200
        # The log keeps 9,000 queries: once full, a capture would see none (and warn).
        connection.queries_log.clear()
        with CaptureQueriesContext(connection) as queries:
            event_append(
                run=run,
                events=[NewEvent("run.note", {"text": message})],
                expected_version=run.version,
            )
        sizes.append(sum(len(q["sql"]) for q in queries.captured_queries))
    early, late = sum(sizes[10:60]) / 50, sum(sizes[-50:]) / 50
    assert min(sizes) > 0 and late <= early * 1.05, (early, late)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_never_gap_or_duplicate():
    from tests.factories import make_run

    run = make_run()
    errors: list[BaseException] = []

    def writer(tag: str) -> None:
        try:
            mine = Run.objects.get(pk=run.pk)
            for i in range(50):
                event_append(run=mine, events=[NewEvent("run.note", {"text": f"{tag}{i}"})])
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(t,)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    seqs = list(Event.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, 102))
    assert connection.vendor == "postgresql"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_duplicate_key_yields_one_row():
    from tests.factories import make_run

    run = make_run()
    barrier = threading.Barrier(4)

    def deliver() -> None:
        try:
            mine = Run.objects.get(pk=run.pk)
            barrier.wait()
            event_append(run=mine, events=[NewEvent("signal.received", {"name": "x"}, key="dup")])
        finally:
            connections.close_all()

    threads = [threading.Thread(target=deliver) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert Event.objects.filter(key="dup").count() == 1
    seqs = list(Event.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == [1, 2]


def test_nul_characters_are_refused_with_the_path(run):
    with pytest.raises(NotJSONSerializable, match="data.text is a string with a NUL"):
        NewEvent("run.note", {"text": "a\x00b"})
