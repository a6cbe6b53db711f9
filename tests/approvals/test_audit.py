"""The audit query: filter every action and decision by actor, run, action and time."""
from __future__ import annotations

import datetime as dt

import pytest

from agentops import clock
from approvals.actions import ACTIONS
from approvals.audit import audit_query, audit_record
from approvals.models import Approval
from tests.approvals.conftest import approval_run, blocked_run

pytestmark = pytest.mark.django_db


def test_filter_by_actor_run_action_and_time(engine, users):
    blocked = blocked_run()
    ACTIONS["retry"].execute(users["operator"], blocked, "try again")
    waiting = approval_run()
    ACTIONS["approve"].execute(users["support"], Approval.objects.get(run=waiting), "ok")
    audit_record(actor=users["admin"], action="settings.budget", reason="cap", data={"x": 1})

    assert [i.action for i in audit_query()] == ["settings.budget", "approval.approve",
                                                 "run.retry"]
    assert [i.action for i in audit_query(actor=users["support"])] == ["approval.approve"]
    assert [i.action for i in audit_query(actor="operator")] == ["run.retry"]
    assert [i.action for i in audit_query(run_id=blocked.pk)] == ["run.retry"]
    assert [i.action for i in audit_query(action="run.")] == ["run.retry"]
    assert [i.action for i in audit_query(action="approval.*")] == ["approval.approve"]
    assert audit_query(action="run.skip") == []
    later = clock.now() + dt.timedelta(minutes=1)
    assert audit_query(since=later) == [] and len(audit_query(until=later)) == 3
    newest = audit_query(limit=1)[0]
    assert [i.action for i in audit_query(before_id=newest.pk)] == ["approval.approve",
                                                                    "run.retry"]
