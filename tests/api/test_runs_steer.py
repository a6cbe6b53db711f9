"""Steering runs through the API: fork, signals, operator actions."""
from __future__ import annotations

import uuid

from approvals.models import Intervention
from runs.engine.runtime.events import NewEvent, event_append
from runs.models import Run, Signal
from tests.api.conftest import assert_error
from tests.factories import make_run


def _blocked_run() -> Run:
    run = make_run()
    Run.objects.filter(pk=run.pk).update(status="blocked", attention_reason="stalled")
    run.refresh_from_db()
    return run


def test_fork_starts_a_new_run_from_a_seq(operator, settings):
    settings.AGENTOPS_ENQUEUE_TICKS = False
    run = make_run()
    event_append(run=run, events=[NewEvent("run.note", {"text": "1"}), NewEvent("run.note", {"text": "2"})])
    response = operator.post_json(f"/api/runs/{run.pk}/fork", {"seq": 2})
    assert response.status_code == 201, response.content
    fork = Run.objects.get(pk=response.json()["id"])
    assert fork.forked_from_id == run.pk and fork.forked_at_seq == 2
    assert response.json()["forked_from_id"] == str(run.pk)


def test_fork_refusals(operator, viewer, settings):
    settings.AGENTOPS_ENQUEUE_TICKS = False
    run = make_run()
    assert_error(operator.post_json(f"/api/runs/{run.pk}/fork", {"seq": 99}), 422)
    assert_error(operator.post_json(f"/api/runs/{run.pk}/fork", {"seq": 0}), 422)
    assert_error(viewer.post_json(f"/api/runs/{run.pk}/fork", {"seq": 1}), 403)
    assert_error(operator.post_json(f"/api/runs/{uuid.uuid4()}/fork", {"seq": 1}), 404)
    assert Run.objects.count() == 1


def test_a_signal_is_kept_once_per_key(operator):
    run = make_run()
    body = {"name": "payment_received", "payload": {"amount": 10}, "key": "pay-1"}
    first = operator.post_json(f"/api/runs/{run.pk}/signals", body)
    second = operator.post_json(f"/api/runs/{run.pk}/signals", body)
    assert first.status_code == second.status_code == 200, first.content
    assert first.json()["id"] == second.json()["id"]
    assert Signal.objects.filter(run=run).count() == 1


def test_signal_refusals(operator, viewer):
    run = make_run()
    body = {"name": "x", "payload": {}, "key": "k"}
    assert_error(viewer.post_json(f"/api/runs/{run.pk}/signals", body), 403)
    assert_error(operator.post_json(f"/api/runs/{run.pk}/signals", {**body, "key": ""}), 422)
    operator.post_json(f"/api/runs/{run.pk}/signals", body)
    other = make_run()
    assert_error(operator.post_json(f"/api/runs/{other.pk}/signals", body), 409,
                 "signal_conflict")
    Run.objects.filter(pk=run.pk).update(status="succeeded")
    assert_error(operator.post_json(f"/api/runs/{run.pk}/signals", {**body, "key": "k2"}), 409)


def test_operator_terminates_a_blocked_run_and_it_is_audited(operator):
    run = _blocked_run()
    response = operator.post_json(f"/api/runs/{run.pk}/actions",
                                  {"action": "terminate", "reason": "customer left",
                                   "confirm": "terminate"})
    assert response.status_code == 200, response.content
    assert response.json()["run"]["status"] in {"failed", "cancelled"}
    audit = Intervention.objects.get(run=run)
    assert (audit.action, audit.reason, audit.actor) == ("run.terminate", "customer left",
                                                         operator.user)


def test_an_action_that_does_not_apply_is_409_and_changes_nothing(operator):
    run = make_run()
    error = assert_error(operator.post_json(f"/api/runs/{run.pk}/actions",
                                            {"action": "retry", "reason": "try"}), 409)
    assert error["code"] == "not_applicable"
    assert not Intervention.objects.exclude(action__startswith="apikey.").exists()


def test_action_refusals(operator, viewer):
    run = _blocked_run()
    url = f"/api/runs/{run.pk}/actions"
    assert_error(viewer.post_json(url, {"action": "terminate", "reason": "x"}), 403)
    assert_error(operator.post_json(url, {"action": "terminate", "reason": ""}), 422)
    assert_error(operator.post_json(url, {"action": "explode", "reason": "x"}), 422)
    assert_error(operator.post_json(url, {"action": "retry", "reason": "x",
                                          "params": {"nope": 1}}), 422)
    assert_error(operator.post_json(url, {"action": "raise_budget", "reason": "x",
                                          "params": {"tokens": 10}}), 403)  # admins only
    assert_error(operator.post_json(f"/api/runs/{uuid.uuid4()}/actions",
                                    {"action": "terminate", "reason": "x"}), 404)
    run.refresh_from_db()
    assert run.status == "blocked" and not Intervention.objects.exclude(action__startswith="apikey.").exists()


def test_bulk_action_previews_the_count_then_terminates_each_run(operator, settings):
    settings.AGENTOPS_ENQUEUE_TICKS = False
    runs = [_blocked_run() for _ in range(3)]
    body = {"action": "terminate", "reason": "bad batch", "confirm": "terminate",
            "filter": {"status": ["blocked"]}, "preview": True}
    preview = operator.post_json("/api/runs/bulk-actions", body)
    assert preview.status_code == 200, preview.content
    answer = preview.json()
    assert (answer["count"], answer["results"], len(answer["previews"])) == (3, [], 3)
    assert {p["run_id"] for p in answer["previews"]} == {str(r.pk) for r in runs}
    assert all(p["refusal"] == "" and isinstance(p["calls"], list) for p in answer["previews"])
    assert Run.objects.filter(status="blocked").count() == 3
    done = operator.post_json("/api/runs/bulk-actions", {**body, "preview": False})
    assert done.status_code == 200, done.content
    assert {r["outcome"] for r in done.json()["results"]} == {"done"}
    assert Run.objects.filter(pk__in=[r.pk for r in runs], status="cancelled").count() == 3
    assert Intervention.objects.filter(action="run.terminate").count() == 3


def test_bulk_action_refusals(operator, viewer, settings):
    settings.AGENTOPS_ENQUEUE_TICKS = False
    run = _blocked_run()
    body = {"action": "terminate", "reason": "x", "run_ids": [str(run.pk)]}
    assert_error(viewer.post_json("/api/runs/bulk-actions", body), 403)
    assert_error(operator.post_json("/api/runs/bulk-actions", {**body, "reason": ""}), 422)
    both = {**body, "filter": {"status": ["blocked"]}}
    assert_error(operator.post_json("/api/runs/bulk-actions", both), 422)
    run.refresh_from_db()
    assert run.status == "blocked"


def test_irreversible_actions_answer_422_without_their_typed_word(operator, settings):
    """Terminate (also as POST /cancel and in bulk) runs only with "terminate" typed."""
    settings.AGENTOPS_ENQUEUE_TICKS = False
    run = _blocked_run()
    for url, body in ((f"/api/runs/{run.pk}/actions", {"action": "terminate", "reason": "x"}),
                      (f"/api/runs/{run.pk}/cancel", {"reason": "x"}),
                      ("/api/runs/bulk-actions", {"action": "terminate", "reason": "x",
                                                  "run_ids": [str(run.pk)]})):
        for typed in ("", "yes"):
            error = assert_error(operator.post_json(url, {**body, "confirm": typed}), 422)
            assert error["code"] == "confirmation_required", url
            assert "Terminate cannot be undone" in error["message"] if not typed else \
                "“yes” does not confirm Terminate" in error["message"]
    run.refresh_from_db()
    assert run.status == "blocked" and not Intervention.objects.exclude(action__startswith="apikey.").exists()
    done = operator.post_json(f"/api/runs/{run.pk}/actions",
                              {"action": "terminate", "reason": "x", "confirm": " Terminate "})
    assert done.status_code == 200, done.content
    assert Intervention.objects.get(run=run).action == "run.terminate"
