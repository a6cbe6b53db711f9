"""A probe that found a different effect under the call's key never settles the call.

Generated (asked, found) pairs go through the engine: a refund times out after the payment
backend recorded it — with the values asked for, or with some of them changed — and the
engine probes. Agreeing answers settle the call as succeeded; contradicting ones leave it
``unknown`` with asked vs found on the API's recommendation and on the run page.
"""
from __future__ import annotations

import random
from typing import Any

import pytest
from django.urls import reverse

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import FoundDifferent, ToolResult, tool
from ledger.errors import ToolTimeout
from ledger.models import ToolCall
from runs.services import run_start
from tests.conftest import drive
from tests.console_factories import client_for, make_role_users

pytestmark = pytest.mark.django_db

# The payment backend: what it holds under each idempotency key, and what it does next.
BACKEND: dict[str, dict[str, Any]] = {}
NEXT: dict[str, Any] = {"tamper": {}, "different": False}


def _record(key: str, asked: dict[str, Any]) -> dict[str, Any]:
    if key not in BACKEND:
        BACKEND[key] = {**asked, **NEXT["tamper"], "refund_id": f"rf_{key[:8]}"}
    return BACKEND[key]


def _probe(ctx, order: str, amount: float, currency: str) -> Any:
    found = BACKEND.get(ctx.idempotency_key)
    if found is None:
        return None
    if NEXT["different"]:
        return FoundDifferent(facts=found, summary="a refund to another card")
    return ToolResult(facts=found, summary=f"refund {found['refund_id']} exists (probed)")


def _refund(ctx, order: str, amount: float, currency: str) -> ToolResult:
    """Refund an order; the backend answers after the caller gave up (a timeout after send)."""
    _record(ctx.idempotency_key, {"order": order, "amount": amount, "currency": currency})
    raise ToolTimeout("payment API: no answer in time (the refund may have been made)")


refund = tool(_refund, name="refund", effect="write", idempotent=True, probe=_probe)


def _probe_paid(ctx, order: str, amount: float, currency: str) -> Any:
    found = BACKEND.get(ctx.idempotency_key)
    return None if found is None else {"refunded_amount": found["amount"], "id": "x"}


refund_named = tool(_refund, name="refund_named", effect="write", probe=_probe_paid,
                    reversibility="manual", identity={"amount": "refunded_amount"})


def _run(tool_name: str, asked: dict[str, Any]):
    name = f"probe-{tool_name}"
    if not registry.has(name, "1"):
        registry.register(Agent(
            name=name, version="1", system_prompt="You refund orders.",
            tools=[refund, refund_named], plan=[StepSpec("refund")],
            model=lambda: ScriptedModel({"refund": [
                lambda sc: call(tool_name, **sc.input), say("refunded")]})))
    run = run_start(agent=name, goal="refund the order", input=asked)
    drive(run)
    run.refresh_from_db()
    return run


@pytest.fixture(autouse=True)
def _backend(engine):
    """An empty payment backend for each test (engine settings: in-process ticks)."""
    BACKEND.clear()
    NEXT.update(tamper={}, different=False)
    yield
    BACKEND.clear()


def _pairs(n: int, seed: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Return ``n`` generated (asked, tamper) pairs: about half agree, the rest differ."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        asked = {"order": f"A-{rng.randint(1, 999)}", "amount": rng.choice([120, 59.9, 1, 0]),
                 "currency": rng.choice(["EUR", "USD"])}
        kind = rng.choice(["same", "same_float", "amount", "currency", "order", "two"])
        tamper = {"same": {}, "same_float": {"amount": float(asked["amount"])},
                  "amount": {"amount": asked["amount"] + rng.choice([90, 0.01, -1])},
                  "currency": {"currency": "GBP"}, "order": {"order": f"B-{i}"},
                  "two": {"amount": 210, "currency": "CHF"}}[kind]
        out.append((asked, tamper))
    return out


@pytest.mark.parametrize("asked,tamper", _pairs(16, seed=40))
def test_generated_pairs_settle_only_when_the_probe_agrees(asked, tamper):
    NEXT["tamper"] = tamper
    run = _run("refund", asked)
    found = {**asked, **tamper}
    differs = sorted(k for k in asked if found[k] != asked[k])
    call_row = ToolCall.objects.get(run=run)
    if not differs:
        assert (run.status, call_row.status) == ("succeeded", "succeeded")
        assert call_row.facts["amount"] == asked["amount"]
        return
    assert run.status == "unknown" and call_row.status == "unknown", run.attention_detail
    assert run.recommended_action == "confirm_executed"
    assert tuple(run.recommended_alternatives)[:2] == ("terminate", "confirm_not_executed")
    for k in differs:
        assert f"{k}: asked " in run.recommendation_why
        assert f"{k} " in run.attention_detail
    assert "under this call's key, but not what was asked" in run.recommendation_why
    assert len(BACKEND) == 1  # nothing ran again


def test_the_refund_for_120_found_as_210_is_shown_side_by_side():
    NEXT["tamper"] = {"amount": 210}
    run = _run("refund", {"order": "A-1", "amount": 120, "currency": "EUR"})
    assert run.status == "unknown"
    operator = make_role_users()["operator"]
    api = client_for(operator).get(f"/api/runs/{run.pk}").json()
    assert api["recommended_action"] == "confirm_executed"
    assert "amount: asked 120, found 210" in api["recommendation_why"]
    html = client_for(operator).get(
        reverse("console:run", args=[run.pk])).content.decode()
    assert 'data-asked-found' in html
    assert ('<tr data-differs="amount"><th scope="row" class="mono">amount</th>'
            '<td class="mono" data-asked>120</td><td class="mono" data-found>210</td>') in html


def test_a_probe_saying_found_but_different_is_unknown():
    NEXT["different"] = True
    run = _run("refund", {"order": "A-2", "amount": 30, "currency": "EUR"})
    assert run.status == "unknown" and ToolCall.objects.get(run=run).status == "unknown"
    assert "a refund to another card" in run.attention_detail


@pytest.mark.parametrize("tamper,status", [({}, "succeeded"), ({"amount": 99}, "unknown")])
def test_declared_identity_compares_facts_named_otherwise(tamper, status):
    NEXT["tamper"] = tamper
    run = _run("refund_named", {"order": "A-3", "amount": 40, "currency": "EUR"})
    assert run.status == status
    if status == "unknown":
        assert "amount: asked 40, found 99" in run.recommendation_why


def test_identity_must_name_arguments_of_a_probed_tool():
    with pytest.raises(ValueError, match="identity names nope"):
        tool(_refund, name="bad", effect="write", probe=_probe, identity=("nope",))
    with pytest.raises(ValueError, match="declare probe= too"):
        tool(_refund, name="bad2", effect="write", identity=("amount",))
