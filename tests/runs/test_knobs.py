"""Knobs that used to be ignored, driven through the engine, the console and retention."""
from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse

from agentops import clock
from agentops.llm.protocol import RateLimited
from tests.scripted_items import fail_then
from ledger.models import Artifact, ToolAttempt, ToolCall
from ledger.retention import events_prune
from runs.engine.runtime.transition import run_claim
from runs.models import BudgetPolicy, Run
from runs.services import run_start
from runs.sweeper import sweep_once
from tests.conftest import drive
from tests.console_factories import client_for, make_role_users
from tests.engine_agents import call, say
from tests.runs.waits_helpers import later

pytestmark = pytest.mark.django_db


def test_max_turns_per_step_blocks_a_step_that_keeps_calling_tools(engine):
    script = {"work": [call("lookup", item=str(i)) for i in range(7)] + [say("done")]}
    engine.make_agent("chatty", script, plan=["work"], max_turns_per_step=2)
    run = run_start(agent="chatty", goal="g")
    assert drive(run) == "blocked"
    assert run.attention_reason == "loop_detected" and run.model_calls == 2
    assert "used its 2 model turns" in run.attention_detail
    # The operator's retry gives the step a fresh allowance of turns.
    operator = make_role_users()["operator"]
    response = client_for(operator).post(reverse("console:run_action", args=[run.pk, "retry"]),
                                         {"reason": "let it go on", "seen_seq": run.last_seq})
    assert response.status_code == 302
    assert drive(run) == "blocked" and run.model_calls == 4


def _flaky_run(engine, name: str) -> Run:
    engine.make_agent(name, {"work": [fail_then(RateLimited("slow down"), say("ok"), times=2)]},
                      plan=["work"])
    return run_start(agent=name, goal="g")


def test_a_budget_policy_step_retry_limit_is_applied(engine):
    assert drive(_flaky_run(engine, "flaky-default")) == "succeeded"  # 2 retries <= 3
    BudgetPolicy.objects.create(agent_name="flaky-strict", step_retry_limit=1)
    run = _flaky_run(engine, "flaky-strict")
    assert run.step_retry_limit == 1
    assert drive(run) == "blocked" and run.attention_reason == "retry_exhausted"
    assert "after 1 retries" in run.attention_detail


def test_the_recovery_limit_setting_is_every_new_run_s_limit(engine, settings):
    settings.AGENTOPS_RECOVERY_LIMIT = 0
    engine.make_agent("fragile", {"s": [say("ok")]}, plan=["s"])
    run = run_start(agent="fragile", goal="g")
    assert run.recovery_limit == 0
    run_claim(run_id=run.pk, owner="dead", ttl_s=1)
    with later(2):
        sweep_once()
    run.refresh_from_db()
    assert run.status == "blocked" and run.attention_reason == "recovery_limit"


def test_an_attempt_log_is_recorded_linked_and_kept_by_retention(engine):
    engine.make_agent("logger", {"s": [call("big", n=3), say("ok")]}, plan=["s"])
    run = run_start(agent="logger", goal="g")
    assert drive(run) == "succeeded"
    attempt = ToolAttempt.objects.get(tool_call__run=run)
    assert attempt.log_sha256 and attempt.log_sha256 == attempt.tool_call.artifact_sha256
    viewer = client_for(make_role_users()["operator"])  # raw logs: operators and up
    link = reverse("console:run_artifact", args=[run.pk, attempt.log_sha256])
    assert link in viewer.get(reverse("console:run", args=[run.pk])).content.decode()
    assert b"raw raw" in viewer.get(link).content
    # The call's own output moved on; the attempt's log alone keeps the artifact.
    ToolCall.objects.filter(run=run).update(artifact_sha256="")
    Artifact.objects.update(created_at=clock.now() - dt.timedelta(days=90))
    events_prune(older_than_days=30, dry_run=False)
    assert Artifact.objects.filter(sha256=attempt.log_sha256).exists()
    ToolAttempt.objects.filter(pk=attempt.pk).update(log_sha256="")
    events_prune(older_than_days=30, dry_run=False)
    assert not Artifact.objects.filter(sha256=attempt.log_sha256).exists()
