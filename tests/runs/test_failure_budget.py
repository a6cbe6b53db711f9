"""The run's failure budget: failed attempts across all its steps block it, not only per step.

Runs go through the engine (model-call failures retried by the step, tool attempts retried by
the ledger); the operator reads the page and presses Retry step through the console, and the
admin's budget policy for one agent wins over the agent's code and the setting.
"""
from __future__ import annotations

import pytest
from django.urls import reverse

from agentops.agents import Agent, Budget, StepSpec, registry
from agentops.llm import protocol as p
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from ledger.errors import ToolTransient
from runs.models import BudgetPolicy, Run
from runs.services import run_start
from tests.conftest import drive
from tests.console_factories import client_for, make_role_users

pytestmark = pytest.mark.django_db
FAULTS: list[BaseException | None] = []


@tool(effect="read")
def fetch(ctx, page: int) -> ToolResult:
    """Fetch a page (fails while FAULTS says so)."""
    if FAULTS and (fault := FAULTS.pop(0)) is not None:
        raise fault
    return ToolResult(facts={"page": page}, summary=f"page {page}")


def _model_failing_once(step: str):
    """Return a script item raising a server error the first time only (a model hiccup)."""
    seen: set[str] = set()

    def item(sc):
        if step not in seen:
            seen.add(step)
            return p.ServerError("model 503")
        return call("fetch", page=1)
    return item


def _agent(name: str, budget: Budget) -> None:
    steps = ("a", "b", "c", "d")
    script = {s: [_model_failing_once(s), say(f"{s} done")] for s in steps}
    registry.register(Agent(name=name, version="1", system_prompt="Fetch pages.", tools=[fetch],
                            plan=[StepSpec(s) for s in steps],
                            model=lambda: ScriptedModel(script), budget=budget))


@pytest.fixture(autouse=True)
def _faults(engine):
    FAULTS.clear()
    yield
    FAULTS.clear()


def test_failures_in_different_steps_add_up_to_the_run_budget():
    """Each step fails once (model) and its fetch once (tool): no step reaches its own
    retry limit, but the run's fourth failed attempt reaches its budget of 4."""
    FAULTS.extend([ToolTransient("backend hiccup"), None] * 4)
    _agent("fb-sum", Budget(failures=4))
    run = run_start(agent="fb-sum", goal="fetch four pages")
    assert drive(run) == "blocked"
    assert run.attention_reason == "failure_budget"
    assert "4 failed attempts across the run's steps" in run.attention_detail
    assert run.steps_done == 1  # step a failed twice, step b twice: blocked in b
    assert run.recommended_action == "retry"
    assert "fresh failure allowance" in run.recommendation_why


def test_a_person_retries_and_the_run_gets_a_fresh_allowance_through_the_console():
    FAULTS.extend([ToolTransient("backend hiccup"), None] * 4)
    _agent("fb-console", Budget(failures=3))
    run = run_start(agent="fb-console", goal="fetch four pages")
    assert drive(run) == "blocked"
    operator = make_role_users()["operator"]
    page = client_for(operator).get(reverse("console:run", args=[run.pk])).content.decode()
    assert "Too many failures in this run" in page
    resp = client_for(operator).post(reverse("console:run_action", args=[run.pk, "retry"]),
                                     {"reason": "backend fixed"})
    assert resp.status_code in (200, 302), resp.content[:500]
    run.refresh_from_db()
    assert drive(run) == "blocked"  # 3 more failures (b's fetch, c twice) use the new allowance
    assert run.attention_reason == "failure_budget"
    FAULTS.clear()
    client_for(operator).post(reverse("console:run_action", args=[run.pk, "retry"]),
                              {"reason": "really fixed"})
    run.refresh_from_db()
    assert drive(run) == "succeeded"
    assert run.interventions.filter(action="run.retry").count() == 2


def test_the_agents_budget_policy_wins_and_the_setting_is_the_default(settings):
    FAULTS.extend([ToolTransient("backend hiccup"), None] * 4)
    _agent("fb-policy", Budget(failures=100))
    BudgetPolicy.objects.create(agent_name="fb-policy", run_failure_limit=2)
    run = run_start(agent="fb-policy", goal="fetch")
    assert run.failure_limit == 2
    assert drive(run) == "blocked" and run.attention_reason == "failure_budget"

    settings.AGENTOPS_RUN_FAILURE_LIMIT = 0  # no run-level limit: each step's own limit only
    FAULTS.extend([ToolTransient("backend hiccup"), None] * 4)
    _agent("fb-none", Budget())
    run = run_start(agent="fb-none", goal="fetch")
    assert run.failure_limit is None
    assert drive(run) == "succeeded"


def test_the_api_and_the_settings_form_carry_the_limit():
    admin = make_role_users()["admin"]
    client = client_for(admin)
    resp = client.post(reverse("console:settings_new", args=["budget"]),
                       {"agent_name": "fb-form", "recovery_limit": 5, "step_retry_limit": 3,
                        "run_failure_limit": 0, "on_deadline": ""})
    assert resp.status_code == 422 and b"Must be above zero" in resp.content
    client.post(reverse("console:settings_new", args=["budget"]),
                {"agent_name": "fb-form", "recovery_limit": 5, "step_retry_limit": 3,
                 "run_failure_limit": 6, "on_deadline": "terminate"})
    policy = BudgetPolicy.objects.get(agent_name="fb-form")
    assert (policy.run_failure_limit, policy.on_deadline) == (6, "terminate")
    _agent("fb-form", Budget())
    run = run_start(agent="fb-form", goal="fetch")
    body = client.get(f"/api/runs/{run.pk}").json()
    assert (body["failure_limit"], body["on_deadline"]) == (6, "terminate")
    assert Run.objects.get(pk=run.pk).failure_limit == 6
