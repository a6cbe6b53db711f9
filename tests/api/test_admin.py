"""Admin endpoints: budget policies and tool limits, admins only, every change audited."""
from __future__ import annotations

from approvals.models import Intervention
from runs.models import BudgetPolicy
from tests.api.conftest import assert_error


def test_admin_creates_reads_and_updates_a_budget_policy(admin):
    created = admin.post_json("/api/admin/budget-policies",
                              {"agent_name": "billing", "max_tokens": 1000})
    assert created.status_code == 201, created.content
    policy = created.json()
    assert policy["max_tokens"] == 1000 and policy["recovery_limit"] == 5
    assert admin.get(f"/api/admin/budget-policies/{policy['id']}").json() == policy
    updated = admin.patch_json(f"/api/admin/budget-policies/{policy['id']}",
                               {"max_tokens": None, "max_model_calls": 50}).json()
    assert updated["max_tokens"] is None and updated["max_model_calls"] == 50
    assert updated["agent_name"] == "billing"
    rows = [a["agent_name"] for a in admin.get("/api/admin/budget-policies").json()]
    assert rows == ["billing"]


def test_each_policy_change_writes_an_audit_row(admin):
    policy = admin.post_json("/api/admin/budget-policies", {"max_seconds": 60}).json()
    admin.patch_json(f"/api/admin/budget-policies/{policy['id']}", {"max_seconds": 120})
    rows = list(Intervention.objects.exclude(action__startswith="apikey.").order_by("id"))
    assert [r.actor_id for r in rows] == [admin.user.pk] * 2
    assert rows[-1].data["changes"]["max_seconds"] == [60, 120]


def test_a_second_policy_for_the_same_agent_is_409(admin):
    admin.post_json("/api/admin/budget-policies", {"agent_name": "a"})
    assert_error(admin.post_json("/api/admin/budget-policies", {"agent_name": "a"}), 409,
                 "budget_policy_exists")


def test_invalid_policy_values_are_422(admin):
    assert_error(admin.post_json("/api/admin/budget-policies", {"max_tokens": 0}), 422)
    policy = BudgetPolicy.objects.create(agent_name="x")
    assert_error(admin.patch_json(f"/api/admin/budget-policies/{policy.pk}",
                                  {"recovery_limit": None}), 422)
    assert_error(admin.patch_json("/api/admin/budget-policies/424242", {}), 404)


def test_only_admins_see_or_change_policies(operator, support, viewer):
    policy = BudgetPolicy.objects.create(agent_name="x")
    for client in (operator, support, viewer):
        assert_error(client.get("/api/admin/budget-policies"), 403)
        assert_error(client.patch_json(f"/api/admin/budget-policies/{policy.pk}",
                                       {"max_tokens": 5}), 403)
    assert not Intervention.objects.exclude(action__startswith="apikey.").exists()


def test_admin_sets_and_reads_tool_limits(admin):
    response = admin.put_json("/api/admin/tool-limits/send_email",
                              {"concurrency": 2, "rate_per_minute": 30})
    assert response.status_code == 200, response.content
    assert response.json()["concurrency"] == 2
    changed = admin.put_json("/api/admin/tool-limits/send_email", {"concurrency": None}).json()
    assert changed["concurrency"] is None and changed["rate_per_minute"] == 30
    assert admin.get("/api/admin/tool-limits/send_email").json()["rate_per_minute"] == 30
    assert [t["tool"] for t in admin.get("/api/admin/tool-limits").json()] == ["send_email"]
    assert Intervention.objects.exclude(action__startswith="apikey.").count() == 2


def test_tool_limit_refusals(admin, operator):
    assert_error(admin.get("/api/admin/tool-limits/unknown"), 404, "tool_limit_not_found")
    assert_error(admin.put_json("/api/admin/tool-limits/x", {"concurrency": 0}), 422)
    assert_error(admin.put_json("/api/admin/tool-limits/bad%20name", {}), 422)
    assert_error(operator.put_json("/api/admin/tool-limits/x", {"concurrency": 1}), 403)
