"""Issue 31 Build 3: every ended run says what stands, on its panel and in the API.

The runs are made by the real loop (tests.ops_runs: a 250 refund, an irreversible email, then
a block); the operator acts through the console's HTTP endpoints, as a person would.
"""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from approvals.apikeys import apikey_create
from ledger.models import ToolCall
from runs.models import Event, Run
from tests.api.conftest import ApiClient
from tests.console_factories import client_for
from tests.ops_runs import refund_then_blocked

pytestmark = pytest.mark.django_db


def _act(user, run: Run, verb: str, **data) -> None:
    response = client_for(user).post(reverse("console:run_action", args=[run.pk, verb]), data)
    assert response.status_code == 302, response.content.decode()[:2000]


def _panel(user, run: Run) -> str:
    return client_for(user).get(reverse("console:run", args=[run.pk])).content.decode()


def _api(user, run: Run) -> dict:
    _, key = apikey_create(user=user, name="t")
    response = ApiClient(key).get(f"/api/runs/{run.pk}")
    assert response.status_code == 200, response.content
    return response.json()


def _section(html: str, kind: str) -> str:
    match = re.search(rf'data-stands-kind="{kind}">(.*?)</dd>', html, re.S)
    assert match, f"no {kind} row in the panel"
    return re.sub(r"<[^>]+>", "", match.group(1))


def test_rolled_back_then_terminated_run_keeps_its_exceptions_and_says_what_stands(
        engine, users):
    run = refund_then_blocked()
    refund = ToolCall.objects.get(run=run, tool="refund")
    email = ToolCall.objects.get(run=run, tool="email")
    before_refund = Event.objects.get(run=run, type="step.started",
                                      data__step="refund_customer").seq - 1
    _act(users["operator"], run, "rollback", to_seq=before_refund, ticked=email.tool_call_id,
         reason="refunded the wrong order", confirm="250")
    _act(users["operator"], run, "terminate", reason="customer withdrew the return",
         confirm="terminate")
    run.refresh_from_db()
    assert run.status == "cancelled"
    kinds = [e["kind"] for e in run.exceptions]
    assert kinds == ["compensated", "rolled_back", "cancelled"]
    assert run.exceptions[-1]["who"] == "operator"
    assert run.exceptions[-1]["why"] == "customer withdrew the return"

    html = _panel(users["viewer"], run)
    assert "Cancelled by" in html and "customer withdrew the return" in html
    assert "email" in _section(html, "standing") and "cannot be undone" in _section(
        html, "standing")
    undone = _section(html, "compensated")
    assert "refund" in undone and "250" in undone and refund.idempotency_key[-10:] in undone
    assert "refund_customer" in _section(html, "not-done")
    # Above the fold: the list comes before the facts, the metrics and the timeline.
    assert html.index("data-stands") < html.index('class="facts"')

    stands = _api(users["viewer"], run)["what_stands"]
    assert stands["ended_by"] == "operator" and stands["why"] == "customer withdrew the return"
    assert [(e["tool"], e["amount"], e["key"]) for e in stands["compensated"]] == [
        ("refund", "250", refund.idempotency_key)]
    assert [e["tool"] for e in stands["standing"]] == ["email"]
    assert "refund_customer" in [s["key"] for s in stands["not_done"]]
    assert [e["kind"] for e in _api(users["viewer"], run)["exceptions"]] == kinds


def test_terminated_run_says_the_refund_still_stands(engine, users):
    run = refund_then_blocked()
    refund = ToolCall.objects.get(run=run, tool="refund")
    _act(users["operator"], run, "terminate", reason="gave up", confirm="terminate")
    run.refresh_from_db()
    assert [e["kind"] for e in run.exceptions] == ["cancelled"]
    standing = _section(_panel(users["viewer"], run), "standing")
    assert "refund" in standing and "250" in standing and refund.idempotency_key[-10:] in standing
    stands = _api(users["viewer"], run)["what_stands"]
    assert [(e["tool"], e["amount"], e["outcome"]) for e in stands["standing"]] == [
        ("refund", "250", "stands"), ("email", "", "stands")]
    assert [s["key"] for s in stands["not_done"]] == ["notify"]


def test_finish_partial_writes_its_report_with_every_step_not_done(engine, users):
    run = refund_then_blocked()
    _act(users["operator"], run, "finish_partial", reason="the customer has the refund",
         confirm="finish")
    run.refresh_from_db()
    assert run.status == "completed_with_exceptions"
    report = [e for e in run.exceptions if e["kind"] == "finished_partial"]
    assert len(report) == 1 and report[0]["what"].endswith("not done: notify")
    html = _panel(users["viewer"], run)
    assert "not done: notify" in html and "notify" in _section(html, "not-done")
    assert "Tell the customer" in _section(html, "not-done")
    assert "refund" in _section(html, "standing")
    stands = _api(users["viewer"], run)["what_stands"]
    assert stands["status"] == "completed_with_exceptions" and stands["ended_by"] == "operator"
    assert stands["why"] == "the customer has the refund"
    assert [s["key"] for s in stands["not_done"]] == ["notify"]


def test_a_live_run_has_no_what_stands(engine, users):
    run = refund_then_blocked()
    assert "data-stands" not in _panel(users["viewer"], run)
    assert _api(users["viewer"], run)["what_stands"] is None
