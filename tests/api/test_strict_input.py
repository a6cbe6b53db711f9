"""Strict request bodies: no booleans as numbers, no arrays as objects, no numbers as text."""
from __future__ import annotations

import pytest

from tests.api.conftest import assert_error

pytestmark = pytest.mark.django_db


def test_a_boolean_budget_is_refused_not_read_as_1(operator, agent):
    response = operator.post_json("/api/runs", {"agent": agent.name, "goal": "g",
                                                "budget": {"tokens": True}})
    error = assert_error(response, 422, "validation_error")
    assert error["details"]["errors"][0]["loc"][-1] == "tokens"


@pytest.mark.parametrize("value", [True, "5", 5.5])
def test_admin_numbers_must_be_integers(admin, value):
    assert_error(admin.post_json("/api/admin/budget-policies", {"max_tokens": value}), 422)
    assert_error(admin.put_json("/api/admin/tool-limits/lookup", {"concurrency": value}), 422)


@pytest.mark.parametrize("path,method", [
    ("/api/admin/budget-policies", "post_json"),
    ("/api/admin/tool-limits/lookup", "put_json"),
    ("/api/runs", "post_json"),
    ("/api/keys", "post_json"),
])
def test_a_json_array_is_not_an_object(admin, path, method):
    response = getattr(admin, method)(path, [])
    assert_error(response, 422)
    response = getattr(admin, method)(path, [{"max_tokens": 5}])
    assert_error(response, 422)


def test_an_object_where_text_belongs_is_refused(operator, agent):
    assert_error(operator.post_json("/api/runs", {"agent": agent.name, "goal": {"x": 1}}), 422)
    assert_error(operator.post_json("/api/runs", {"agent": agent.name, "goal": "g",
                                                  "input": [1, 2]}), 422)


def test_a_normal_body_is_still_accepted(operator, admin, agent):
    response = operator.post_json("/api/runs", {"agent": agent.name, "goal": "g",
                                                "budget": {"tokens": 1000}})
    assert response.status_code == 201, response.content
    assert admin.post_json("/api/admin/budget-policies",
                           {"agent_name": "x", "max_tokens": 10}).status_code == 201


def test_action_params_are_strict_too(admin):
    import uuid

    response = admin.post_json(f"/api/runs/{uuid.uuid4()}/actions",
                               {"action": "raise_budget", "reason": "r",
                                "params": {"tokens": True}})
    assert_error(response, 422)


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
@pytest.mark.parametrize("query", ["/api/runs?created_after=", "/api/runs?created_before=",
                                   "/api/audit/export?since=", "/api/audit/export?until="])
def test_a_time_with_no_utc_equivalent_is_refused_with_the_range(admin, query, when):
    """A year 0 or 10000 once in UTC (found by the fuzzer: a 500 before) says what is allowed."""
    error = assert_error(admin.get(query + when.replace("+", "%2B")), 422, "validation_error")
    assert "between 0001-01-01 and 9999-12-31 in UTC" in str(error["details"])


def test_a_key_expiring_at_a_time_with_no_utc_equivalent_is_refused(admin):
    response = admin.post_json("/api/keys", {"name": "k", "team": "default", "role": "viewers",
                                             "expires_at": "9999-12-31T23:59:59-01:00"})
    error = assert_error(response, 422, "validation_error")
    assert "in UTC" in str(error["details"])
    assert admin.get("/api/runs?created_after=2026-01-01T00:00:00%2B01:00").status_code == 200
