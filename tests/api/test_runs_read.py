"""Reading runs: list with filters and cursor pages, detail, steps, events, ledger, snapshots."""
from __future__ import annotations

import datetime as dt
import uuid

from runs.engine.runtime.events import NewEvent, event_append
from runs.models import Run, Signal, Snapshot, Step
from tests.api.conftest import assert_error
from tests.factories import make_run


def _ids(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["items"]]


def test_list_is_newest_first_and_pages_with_a_cursor(viewer):
    runs = [make_run(goal=f"goal {i}") for i in range(5)]
    first = viewer.get("/api/runs?limit=2")
    assert _ids(first) == [str(runs[4].pk), str(runs[3].pk)]
    seen = _ids(first)
    cursor = first.json()["next_cursor"]
    while cursor:
        page = viewer.get("/api/runs", {"limit": 2, "cursor": cursor})
        seen += _ids(page)
        cursor = page.json()["next_cursor"]
    assert seen == [str(r.pk) for r in reversed(runs)]


def test_runs_with_the_same_created_time_are_neither_lost_nor_repeated(viewer):
    runs = [make_run() for _ in range(4)]
    Run.objects.update(created_at=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))
    seen, cursor = [], ""
    for _ in range(4):
        page = viewer.get("/api/runs", {"limit": 1, "cursor": cursor})
        seen += _ids(page)
        cursor = page.json()["next_cursor"] or ""
        if not cursor:
            break
    assert sorted(seen) == sorted(str(r.pk) for r in runs)


def test_list_filters_by_status_agent_reason_text_and_created_range(viewer):
    old = make_run(agent="billing", goal="refund order 17")
    Run.objects.filter(pk=old.pk).update(
        status="blocked", attention_reason="stalled",
        created_at=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))
    new = make_run(agent="search", goal="find hotels")
    assert _ids(viewer.get("/api/runs?status=blocked")) == [str(old.pk)]
    assert _ids(viewer.get("/api/runs?status=blocked&status=queued")) == [str(new.pk), str(old.pk)]
    assert _ids(viewer.get("/api/runs?agent=search")) == [str(new.pk)]
    assert _ids(viewer.get("/api/runs?reason=stalled")) == [str(old.pk)]
    assert _ids(viewer.get("/api/runs?text=REFUND")) == [str(old.pk)]
    assert _ids(viewer.get(f"/api/runs?text={new.pk}")) == [str(new.pk)]
    assert _ids(viewer.get("/api/runs?created_after=2026-02-01T00:00:00Z")) == [str(new.pk)]
    assert _ids(viewer.get("/api/runs?created_before=2026-02-01T00:00:00Z")) == [str(old.pk)]


def test_list_rejects_an_unknown_status_with_422(viewer):
    error = assert_error(viewer.get("/api/runs?status=exploded"), 422, "validation_error")
    assert "status" in error["details"]["errors"][0]["loc"]


def test_a_forged_cursor_is_400(viewer):
    for cursor in ("garbage", "W10", "WyJ4IiwgInkiXQ", "%%%"):
        assert_error(viewer.get("/api/runs", {"cursor": cursor}), 400, "bad_cursor")


def test_detail_shows_the_projection(viewer):
    run = make_run(budget_tokens=1000)
    body = viewer.get(f"/api/runs/{run.pk}").json()
    assert body["id"] == str(run.pk)
    assert body["budget_tokens"] == 1000 and body["tokens_used"] == 0
    assert body["status"] == "queued" and body["last_seq"] == 1


def test_detail_of_a_missing_run_is_404_and_a_bad_id_422(viewer):
    assert_error(viewer.get(f"/api/runs/{uuid.uuid4()}"), 404, "run_not_found")
    assert_error(viewer.get("/api/runs/not-a-uuid"), 422)


def test_steps_are_in_plan_order(viewer):
    run = make_run()
    Step.objects.create(run=run, key="b", position=1, title="second")
    Step.objects.create(run=run, key="a", position=0, title="first")
    body = viewer.get(f"/api/runs/{run.pk}/steps").json()
    assert [s["key"] for s in body] == ["a", "b"]


def test_events_tail_after_a_seq(viewer):
    run = make_run()
    event_append(run=run, events=[NewEvent("run.note", {"text": str(i)}) for i in range(5)])
    first = viewer.get(f"/api/runs/{run.pk}/events?limit=4").json()
    assert [e["seq"] for e in first["items"]] == [1, 2, 3, 4]
    assert first["has_more"] is True and first["last_seq"] == 4
    rest = viewer.get(f"/api/runs/{run.pk}/events?after_seq=4").json()
    assert [e["seq"] for e in rest["items"]] == [5, 6] and rest["has_more"] is False
    empty = viewer.get(f"/api/runs/{run.pk}/events?after_seq=6").json()
    assert empty == {"items": [], "last_seq": 6, "has_more": False}


def test_events_of_a_missing_run_are_404(viewer):
    assert_error(viewer.get(f"/api/runs/{uuid.uuid4()}/events"), 404)


def test_snapshots_list_headers_and_read_one_with_state(viewer):
    run = make_run()
    Snapshot.objects.create(run=run, seq=1, phase="step_complete", state={"k": 1}, size=8,
                            sha256="a" * 64, agent_version="1")
    headers = viewer.get(f"/api/runs/{run.pk}/snapshots").json()
    assert headers[0]["seq"] == 1 and "state" not in headers[0]
    one = viewer.get(f"/api/runs/{run.pk}/snapshots/1").json()
    assert one["state"] == {"k": 1}
    assert_error(viewer.get(f"/api/runs/{run.pk}/snapshots/2"), 404, "snapshot_not_found")


def test_signals_are_listed_newest_first(viewer):
    run = make_run()
    Signal.objects.create(run=run, name="approved", key="k1", payload={"ok": True})
    body = viewer.get(f"/api/runs/{run.pk}/signals").json()
    assert [(s["name"], s["key"]) for s in body] == [("approved", "k1")]
