"""Before a recovered or long-waiting run goes on, it re-checks the world it started in.

A tool's ``version_probe`` is asked when the run first uses the tool; after a recovery (a worker
that claimed the run and died: its lease expired, the sweeper took it back) or a long wait
(an approval, a timer) the worker asks again, and checks that the run's requester may still
run it. A change blocks the run ``world_changed`` with before and now on its panel and in the
API; the recommended retry accepts the world as it is now.
"""
from __future__ import annotations

import pytest
from django.conf import settings

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from approvals.models import Approval
from runs.engine.runtime.recovery import runs_recover_expired
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.engine.runtime.transition import run_claim
from runs.engine.runtime.waits import timers_wake
from ledger.errors import ToolRateLimited
from ledger.models import ToolCall
from runs.models import Event
from runs.services import run_start
from tests.conftest import drive
from tests.runs.waits_helpers import later

pytestmark = pytest.mark.django_db
CATALOG = {"version": "2026-11", "calls": 0}


def _catalog_version() -> str:
    return CATALOG["version"]


@tool(effect="read", version_probe=_catalog_version)
def price(ctx, sku: str) -> ToolResult:
    """Read a price from the catalog."""
    CATALOG["calls"] += 1
    if CATALOG.pop("limited", False):
        raise ToolRateLimited("429 from the catalog", next_retry_delay=3600)
    return ToolResult(facts={"sku": sku, "price": 12}, summary=f"{sku} costs 12")


@tool(effect="write", idempotent=True, approval="always")
def order(ctx, sku: str) -> ToolResult:
    """Order an item."""
    return ToolResult(facts={"ordered": sku}, summary=f"ordered {sku}")


def _register(name: str, script: dict) -> Agent:
    return registry.register(Agent(
        name=name, version="1", system_prompt="test", tools=[price, order],
        plan=[StepSpec(k) for k in script], model=lambda: ScriptedModel(script)))


@pytest.fixture(autouse=True)
def _world(settings):
    settings.AGENTOPS_ENQUEUE_TICKS = False
    CATALOG.update(version="2026-11", calls=0)
    yield
    for name in ("world-order", "world-timer"):
        registry._agents.pop((name, "1"), None)
        registry._latest.pop(name, None)


ORDER = {"quote": [call("price", sku="S-1"), say("12")],
         "buy": [call("order", sku="S-1"), say("ordered")]}


def _approve(support, run) -> None:
    approval = Approval.objects.get(run=run, status="pending")
    response = support.post_json(f"/api/approvals/{approval.pk}/decide",
                                 {"decision": "approve", "confirm": "approve"})
    assert response.status_code == 200, response.content


def _lose_the_worker(run) -> None:
    """A worker claims the run and dies: its lease expires and the sweeper takes it back."""
    assert run_claim(run_id=run.pk, owner="lost-worker:7", ttl_s=1) is not None
    with later(settings.AGENTOPS_LEASE_TTL_S + 5):
        assert runs_recover_expired() == [run.pk]


def test_a_recovered_run_blocks_when_a_resource_version_changed(operator, support):
    agent = _register("world-order", ORDER)
    run = run_start(agent=agent.name, goal="buy S-1", actor=operator.user)
    assert drive(run) == "waiting"
    seen = Event.objects.get(run=run, type="resource.version")
    assert seen.data == {"tool": "price", "version": "2026-11"}
    _approve(support, run)  # a short wait: no re-check for it
    _lose_the_worker(run)
    CATALOG["version"] = "2026-12"  # the catalog was upgraded while nobody held the run

    assert drive(run) == "blocked"
    run.refresh_from_db()
    assert run.attention_reason == "world_changed"
    assert "the world changed while this run waited" in run.attention_detail
    assert run.recommended_action == "retry"
    assert "check that the plan still holds" in run.recommendation_why
    body = operator.get(f"/api/runs/{run.pk}").json()
    assert body["world_changed"]["why"] == "recovery"
    assert body["world_changed"]["changes"] == [{
        "kind": "version", "subject": "price", "what": "price version",
        "before": "2026-11", "now": "2026-12"}]
    operator.force_login(operator.user)
    page = operator.get(f"/runs/{run.pk}/").content.decode()
    assert "The world changed while this run waited" in page
    assert "<td class=\"mono\" data-before>2026-11</td>" in page
    assert "<td class=\"mono\" data-now>2026-12</td>" in page
    assert ToolCall.objects.get(run=run, tool="order").attempts == 0  # blocked before it ran
    assert replay_state(run.pk) == load_state(run.pk)  # the log reduces to the snapshot

    # Retry accepts the catalog as it is now: the run goes on and does not block again.
    response = operator.post_json(f"/api/runs/{run.pk}/actions",
                                  {"action": "retry", "reason": "new catalog is fine"})
    assert response.status_code == 200, response.content
    assert drive(run) == "succeeded"


def test_a_long_timer_wait_blocks_when_the_requester_lost_the_role(operator, client_for):
    CATALOG["limited"] = True  # the first call is told to come back in an hour
    agent = _register("world-timer", {"quote": [call("price", sku="S-1"), say("12")]})
    run = run_start(agent=agent.name, goal="price S-1", actor=operator.user)
    assert drive(run) == "waiting"
    run.refresh_from_db()
    assert run.wait_kind == "timer"
    operator.user.groups.clear()  # the operator who started it moved to another team

    with later(3700):
        assert timers_wake() == [run.pk]
        assert drive(run) == "blocked"
    run.refresh_from_db()
    assert run.attention_reason == "world_changed"
    change = Event.objects.get(run=run, type="world.changed").data
    assert change["why"] == "wait"
    assert change["changes"] == [{
        "kind": "permission", "subject": operator.user.username,
        "what": f"{operator.user.username}'s right to run it",
        "before": "may run it (operators)",
        "now": "no longer an operator in the run's team (holds no role)"}]

    other = client_for("operators", name="second-operator")
    with later(3700):  # still past the hour the catalog asked for
        response = other.post_json(f"/api/runs/{run.pk}/actions",
                                   {"action": "retry", "reason": "I own this now"})
        assert response.status_code == 200, response.content
        assert drive(run) == "succeeded"  # the retrying operator is the requester now
    assert replay_state(run.pk) == load_state(run.pk)
    assert Event.objects.filter(run=run, type="world.checked").count() == 0


def test_a_long_approval_wait_rechecks_and_a_short_one_does_not(operator, support):
    agent = _register("world-order", ORDER)
    short = run_start(agent=agent.name, goal="buy S-1", actor=operator.user)
    long = run_start(agent=agent.name, goal="buy S-1 later", actor=operator.user)
    assert drive(short) == "waiting" and drive(long) == "waiting"
    CATALOG["version"] = "2027-01"
    _approve(support, short)
    assert drive(short) == "succeeded"
    with later(settings.AGENTOPS_WORLD_RECHECK_AFTER_S + 30):
        _approve(support, long)
        assert drive(long) == "blocked"
    long.refresh_from_db()
    assert long.attention_reason == "world_changed"
    assert "price version was 2026-11, now 2027-01" in long.attention_detail
