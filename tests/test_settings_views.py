"""Admin settings pages and the audit log: admin-only edits, validation, audited diffs."""
from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from approvals.models import Intervention
from ledger.models import ToolLimit
from runs.models import BudgetPolicy
from tests.console_factories import make_attention_run, make_intervention, make_role_users

pytestmark = pytest.mark.django_db


@pytest.fixture
def users():
    """One user per role plus a user with no role."""
    return make_role_users()


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("role", ["viewer", "operator", "support"])
def test_only_admins_reach_settings(users, role):
    client = client_for(users[role])
    assert client.get(reverse("console:settings")).status_code == 403
    response = client.post(reverse("console:settings_new", args=["budget"]), {"max_tokens": 5})
    assert response.status_code == 403 and not BudgetPolicy.objects.exists()
    assert "Settings</a>" not in client.get(reverse("console:queue")).content.decode()


def test_admin_creates_a_policy_and_the_diff_is_audited(users):
    client = client_for(users["admin"])
    response = client.post(reverse("console:settings_new", args=["budget"]), {
        "agent_name": "billing", "max_tokens": "50000", "recovery_limit": "5",
        "step_retry_limit": "3"})
    assert response.status_code == 302
    policy = BudgetPolicy.objects.get(agent_name="billing")
    assert policy.max_tokens == 50000 and policy.updated_by == users["admin"]
    row = Intervention.objects.get(action="settings.budget_policy")
    assert row.actor == users["admin"] and row.data["target"] == "billing"
    assert row.data["changes"]["max_tokens"] == [None, 50000]


def test_invalid_policy_is_refused_with_the_reason(users):
    response = client_for(users["admin"]).post(reverse("console:settings_new", args=["budget"]), {
        "agent_name": "", "max_tokens": "0", "recovery_limit": "5", "step_retry_limit": "3"})
    assert response.status_code == 422
    assert "Must be above zero" in response.content.decode()
    assert not BudgetPolicy.objects.exists() and not Intervention.objects.exists()


def test_editing_a_tool_limit_records_only_what_changed(users):
    limit = ToolLimit.objects.create(tool="send_email", concurrency=2)
    response = client_for(users["admin"]).post(
        reverse("console:settings_edit", args=["tool-limit", limit.pk]),
        {"tool": "send_email", "concurrency": "4", "rate_per_minute": "",
         "breaker_threshold": "5", "breaker_cooldown_s": "60"})
    assert response.status_code == 302
    row = Intervention.objects.get(action="settings.tool_limit")
    assert row.data["changes"] == {"concurrency": [2, 4]}
    html = client_for(users["admin"]).get(reverse("console:settings")).content.decode()
    assert "concurrency: 2 → 4" in html


def test_audit_log_filters_by_actor_action_and_run(users):
    run = make_attention_run()
    make_intervention(actor=users["operator"], action="run.retry", run=run, reason="fixed")
    make_intervention(actor=users["support"], action="approval.reject", reason="nope")
    client = client_for(users["viewer"])
    by_actor = client.get(reverse("console:audit"), {"actor": "support"}).content.decode()
    assert "approval.reject" in by_actor and "run.retry" not in by_actor
    by_action = client.get(reverse("console:audit"), {"action": "run."}).content.decode()
    assert "run.retry" in by_action and "approval.reject" not in by_action
    by_run = client.get(reverse("console:audit"), {"run": str(run.pk)}).content.decode()
    assert "run.retry" in by_run and "approval.reject" not in by_run
    bad_run = client.get(reverse("console:audit"), {"run": "nope"}).content.decode()
    assert "No audit rows match" in bad_run
