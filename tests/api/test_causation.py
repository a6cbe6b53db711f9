"""Every event says what caused it, and the chain of causes ends at a root.

A run takes a model call and a read tool call, waits for an approval that a person decides
over HTTP, loses its worker (the lease expires, the sweeper recovers it) and finishes. Every
event's chain (the API's ``/events/{seq}/cause``) ends at the run's start, an operator's
action or the recovery, and the history page shows the chain.
"""
from __future__ import annotations

import pytest
from django.conf import settings

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from approvals.models import Approval, Intervention
from runs.engine.runtime.recovery import runs_recover_expired
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.engine.runtime.transition import run_claim
from runs.models import Event, Run
from runs.services import run_start
from tests.conftest import drive
from tests.runs.waits_helpers import later

pytestmark = pytest.mark.django_db


@tool(effect="read")
def look_up(ctx, order: str) -> ToolResult:
    """Read an order."""
    return ToolResult(facts={"order": order, "paid": 30}, summary=f"order {order} paid 30")


@tool(effect="write", idempotent=True, approval="always")
def refund(ctx, order: str) -> ToolResult:
    """Refund an order."""
    return ToolResult(facts={"refunded": order}, summary=f"refunded {order}")


SCRIPT = {
    "check": [call("look_up", order="A-1"), say("order A-1 paid 30")],
    "refund": [call("refund", order="A-1"), say("refunded")],
}


@pytest.fixture
def agent(settings):
    settings.AGENTOPS_ENQUEUE_TICKS = False
    definition = registry.register(Agent(
        name="cause-agent", version="1", system_prompt="test", tools=[look_up, refund],
        plan=[StepSpec(k) for k in SCRIPT], model=lambda: ScriptedModel(SCRIPT)))
    yield definition
    registry._agents.pop((definition.name, definition.version), None)
    registry._latest.pop(definition.name, None)


def _chain(client, run, seq):
    response = client.get(f"/api/runs/{run.pk}/events/{seq}/cause")
    assert response.status_code == 200, response.content
    return response.json()


def test_every_event_chains_back_to_a_root(agent, support, operator):
    run = run_start(agent=agent.name, goal="refund A-1", actor=operator.user)
    assert drive(run) == "waiting"  # model call, look_up, model call, refund needs approval
    approval = Approval.objects.get(run=run)
    decided = support.post_json(f"/api/approvals/{approval.pk}/decide", {"decision": "approve",
                                                                   "confirm": "approve"})
    assert decided.status_code == 200, decided.content
    # A worker claims the run and dies: its lease runs out and the sweeper recovers it.
    assert run_claim(run_id=run.pk, owner="lost-worker:1", ttl_s=1) is not None
    with later(settings.AGENTOPS_LEASE_TTL_S + 5):
        assert runs_recover_expired() == [run.pk]
    assert drive(run) == "succeeded"
    assert replay_state(run.pk) == load_state(run.pk)  # causes change nothing the log reduces

    events = list(Event.objects.filter(run=run).order_by("seq"))
    assert all(e.caused_by for e in events), [(e.seq, e.type) for e in events if not e.caused_by]
    roots = {}
    for e in events:
        chain = _chain(operator, run, e.seq)
        assert chain["root_kind"] in {"start", "action", "recovery"}, (e.seq, chain)
        assert chain["links"][0]["seq"] == e.seq
        roots[e.seq] = chain
    assert roots[1]["root_kind"] == "start" and "operator" in roots[1]["root_text"]
    decision = Intervention.objects.get(run=run, action="approval.approve")
    by_person = [s for s, c in roots.items() if c["root_kind"] == "action"]
    assert by_person, "the approval decided over HTTP is no event's cause"
    first = min(by_person)
    assert roots[first]["root"]["pk"] == decision.pk
    assert support.user.username in roots[first]["root_text"]
    recovered = Event.objects.get(run=run, type="run.recovered")
    assert recovered.caused_by == "recovery:lost-worker:1"
    checked = Event.objects.get(run=run, type="world.checked")  # the requester may still run it
    between = set(Event.objects.filter(run=run, seq__gt=recovered.seq, seq__lt=checked.seq)
                  .values_list("type", flat=True))
    assert between <= {"run.status", "guard.self_checked"}  # checked before any work
    # what the worker did after the recovery follows from it
    after = [c for s, c in roots.items() if s > recovered.seq]
    assert after and all(c["root_kind"] == "recovery" for c in after)
    listed = operator.get(f"/api/runs/{run.pk}/events").json()["items"]
    assert [e["caused_by"] for e in listed] == [e.caused_by for e in events]

    operator.force_login(operator.user)
    last = events[-1].seq
    page = operator.get(f"/runs/{run.pk}/history/?why={last}").content.decode()
    assert f"Why did #{last} happen?" in page
    assert "the sweeper took the run back from worker lost-worker:1" in page
    assert f'data-why="{recovered.seq}"' in page and "recovery</a>" in page


def test_a_cause_chain_of_a_missing_event_is_404(agent, operator):
    run = run_start(agent=agent.name, goal="refund A-1", actor=operator.user)
    response = operator.get(f"/api/runs/{run.pk}/events/99/cause")
    assert response.status_code == 404 and response.json()["error"]["code"] == "event_not_found"
    operator.force_login(operator.user)
    page = operator.get(f"/runs/{run.pk}/history/?why=99").content.decode()
    assert "the run has no event #99" in page
    assert Run.objects.get(pk=run.pk).last_seq == 1
