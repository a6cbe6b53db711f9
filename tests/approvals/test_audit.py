"""The audit log page: every action, decision and settings change, filtered by who/what/when."""
from __future__ import annotations

import pytest
from django.test import Client

from approvals.actions import ACTIONS
from approvals.models import Approval
from tests.approvals.conftest import approval_run, blocked_run

pytestmark = pytest.mark.django_db


def _actions(client: Client, query: str = "") -> list[str]:
    page = client.get(f"/audit/{query}").content.decode()
    rows = page[page.index('id="audit-rows"'):]
    return [name for name in ("settings.budget_policy", "approval.approve", "run.retry")
            if name in rows]


def test_filter_by_actor_run_action_and_time(engine, users):
    blocked = blocked_run()
    ACTIONS["retry"].execute(users["operator"], blocked, "try again")
    waiting = approval_run()
    ACTIONS["approve"].execute(users["support"], Approval.objects.get(run=waiting), "ok")
    admin = Client()
    admin.force_login(users["admin"])
    # A settings change is audited through approvals.audit.audit_record.
    assert admin.post("/settings/budget/new/", {"agent_name": "x", "recovery_limit": "5",
                                                "step_retry_limit": "3"}).status_code == 302

    assert _actions(admin) == ["settings.budget_policy", "approval.approve", "run.retry"]
    assert _actions(admin, "?actor=support") == ["approval.approve"]
    assert _actions(admin, "?actor=admin") == ["settings.budget_policy"]
    assert _actions(admin, f"?run={blocked.pk}") == ["run.retry"]
    assert _actions(admin, "?action=run.") == ["run.retry"]
    assert _actions(admin, "?action=run.skip") == []
    assert _actions(admin, "?since=2999-01-01") == []
