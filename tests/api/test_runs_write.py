"""Starting and steering runs through the API: create (idempotent), cancel, signal, fork."""
from __future__ import annotations

import uuid

from approvals.models import Intervention
from runs.models import Event, Run
from tests.api.conftest import assert_error
from tests.factories import make_run

BODY = {"agent": "api-test-agent", "goal": "book a room", "input": {"city": "Oslo"},
        "budget": {"tokens": 5000}}


def test_operator_starts_a_run(operator, agent):
    response = operator.post_json("/api/runs", BODY)
    assert response.status_code == 201, response.content
    body = response.json()
    run = Run.objects.get(pk=body["id"])
    assert (run.goal, run.input, run.budget_tokens) == ("book a room", {"city": "Oslo"}, 5000)
    assert run.created_by == operator.user
    assert body["status"] == "queued" and body["steps_total"] == 1
    assert Event.objects.filter(run=run, type="run.created").exists()


def test_the_same_idempotency_key_returns_the_same_run(operator, agent):
    first = operator.post_json("/api/runs", BODY, headers={"Idempotency-Key": "order-17"})
    second = operator.post_json("/api/runs", BODY, headers={"Idempotency-Key": "order-17"})
    assert first.status_code == second.status_code == 201
    assert first.json()["id"] == second.json()["id"]
    assert Run.objects.count() == 1


def test_idempotency_keys_are_per_user(operator, client_for, agent):
    """Another user's same key neither returns nor blocks the first user's run."""
    other = client_for("operators", name="other-operator")
    mine = operator.post_json("/api/runs", BODY, headers={"Idempotency-Key": "order-19"})
    theirs = other.post_json("/api/runs", {**BODY, "goal": "something else"},
                             headers={"Idempotency-Key": "order-19"})
    assert mine.status_code == theirs.status_code == 201
    assert mine.json()["id"] != theirs.json()["id"]
    again = other.post_json("/api/runs", {**BODY, "goal": "something else"},
                            headers={"Idempotency-Key": "order-19"})
    assert again.json()["id"] == theirs.json()["id"]
    assert Run.objects.get(pk=theirs.json()["id"]).created_by == other.user


def test_a_different_body_with_the_same_key_is_409(operator, agent):
    operator.post_json("/api/runs", BODY, headers={"Idempotency-Key": "order-18"})
    other = {**BODY, "goal": "book two rooms"}
    response = operator.post_json("/api/runs", other, headers={"Idempotency-Key": "order-18"})
    assert_error(response, 409)
    assert Run.objects.count() == 1


def test_without_a_key_each_create_is_a_new_run(operator, agent):
    operator.post_json("/api/runs", BODY)
    operator.post_json("/api/runs", BODY)
    assert Run.objects.count() == 2


def test_an_unknown_agent_is_422(operator, agent):
    error = assert_error(operator.post_json("/api/runs", {**BODY, "agent": "nope"}), 422,
                         "unknown_agent")
    assert error["details"]["agent"] == "nope"


def test_an_unknown_agent_422_suggests_the_close_name(operator, agent):
    error = assert_error(operator.post_json("/api/runs", {**BODY, "agent": "api-tset-agent"}),
                         422, "unknown_agent")
    assert error["message"].startswith("no agent named api-tset-agent is registered "
                                       "(did you mean api-test-agent?)")
    assert "@?" not in error["message"]


def test_unknown_fields_are_422_naming_them(operator, agent):
    body = {**BODY, "priority": "high", "budget": {"token": 10}}
    error = assert_error(operator.post_json("/api/runs", body), 422, "validation_error")
    assert error["message"].startswith("unknown field(s) budget.token, priority:")
    assert not Run.objects.exists()


def test_invalid_create_bodies_are_422(operator, agent):
    for bad in ({**BODY, "goal": ""}, {**BODY, "budget": {"tokens": 0}}, {"goal": "x"},
                {**BODY, "input": [1, 2]}, {**BODY, "goal": "   "}):
        assert_error(operator.post_json("/api/runs", bad), 422)
    assert not Run.objects.exists()


def test_viewers_may_not_start_runs(viewer, agent):
    assert_error(viewer.post_json("/api/runs", BODY), 403)
    assert not Run.objects.exists()


def test_operator_cancels_a_run_and_a_second_cancel_is_409(operator):
    run = make_run()
    response = operator.post_json(f"/api/runs/{run.pk}/cancel", {"reason": "wrong city",
                                                                  "confirm": "terminate"})
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "cancelled"
    assert_error(operator.post_json(f"/api/runs/{run.pk}/cancel", {"reason": "again",
                                                                 "confirm": "terminate"}), 409)


def test_cancel_refusals(viewer, operator):
    run = make_run()
    assert_error(viewer.post_json(f"/api/runs/{run.pk}/cancel", {"reason": "x"}), 403)
    assert_error(operator.post_json(f"/api/runs/{uuid.uuid4()}/cancel", {"reason": "x"}), 404)
    assert_error(operator.post_json(f"/api/runs/{run.pk}/cancel", {}), 422)
    assert_error(operator.post_json(f"/api/runs/{run.pk}/cancel", {"reason": ""}), 422)
    run.refresh_from_db()
    assert run.status == "queued"
    assert not Intervention.objects.filter(run=run).exists()


def test_cancel_is_the_terminate_action_audited_with_approvals_closed(operator):
    from approvals.statuses import ApprovalStatus
    from tests.console_factories import make_approval

    run = make_run()
    approval = make_approval(run)
    response = operator.post_json(f"/api/runs/{run.pk}/cancel", {"reason": "wrong customer",
                                                                  "confirm": "terminate"})
    assert response.status_code == 200, response.content
    audit = Intervention.objects.get(run=run)
    assert audit.action == "run.terminate" and audit.reason == "wrong customer"
    assert audit.data["stale_approvals"] == [approval.pk]
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.STALE and approval.decided_at is not None
