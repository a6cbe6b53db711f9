"""A permanent tool failure is answered by what it means, and runs blocked alike are grouped.

The carrier tool calls a real loopback HTTP server with urllib and lets urllib's own
``HTTPError`` escape (or raises a typed ledger error); the engine classifies it by HTTP status and type;
the recommendation is read from the API and the run page.
"""
from __future__ import annotations

from typing import Any

import json
import urllib.request

import pytest
from django.urls import reverse

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from ledger import errors as le
from ledger.models import ToolCall
from runs.services import run_start
from tests.conftest import drive
from tests.console_factories import client_for, make_role_users
from tests.llm.fakes import Answer, fake_provider

pytestmark = pytest.mark.django_db
CARRIER: dict[str, Any] = {"url": "", "raise": None}


@tool(effect="write", idempotent=True, reversibility="manual")
def create_label(ctx, order: str) -> ToolResult:
    """Ask the carrier for a return label (its HTTP API deduplicates on our key)."""
    if CARRIER["raise"] is not None:
        raise CARRIER["raise"]
    request = urllib.request.Request(
        f"{CARRIER['url']}/labels", data=json.dumps({"order": order}).encode(), method="POST",
        headers={"Idempotency-Key": ctx.idempotency_key, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as answer:  # raises HTTPError on 4xx/5xx
        body = json.loads(answer.read())
    return ToolResult(facts={"label": body["label_id"]}, summary="label created")


def _run(n: int = 0):
    if not registry.has("labels", "1"):
        registry.register(Agent(
            name="labels", version="1", system_prompt="You send return labels.",
            tools=[create_label], plan=[StepSpec("label")],
            model=lambda: ScriptedModel({"label": [
                lambda sc: call("create_label", order=sc.input["order"]), say("sent")]})))
    run = run_start(agent="labels", goal="send a return label", input={"order": f"A-{n}"})
    drive(run)
    run.refresh_from_db()
    return run


def _answer(status: int, body: Any) -> Answer:
    return Answer(status, body)


CASES = {
    # HTTP status (or a 200 whose body changed shape) -> class, action, words of the why
    401: ("credentials", "retry", "create_label's backend refused our credentials",
          "fix the credential, then retry"),
    403: ("permission", "retry", "create_label's account lacks permission", "grant it, then retry"),
    404: ("not_found", "restart", "create_label says what it was asked for does not exist",
          "restart from a corrected input"),
    422: ("bad_request", "terminate", "refused the request as invalid",
          "the tool's adapter".replace("the tool's", "create_label's")),
    200: ("api_changed", "retry", "create_label's backend answered in a shape its adapter",
          "fix it, then retry"),
}


@pytest.fixture(autouse=True)
def _carrier(engine):
    """A carrier that answers nothing yet (engine settings: in-process ticks)."""
    CARRIER.update({"url": "", "raise": None})
    yield


@pytest.mark.parametrize("status", sorted(CASES))
def test_an_http_failure_is_read_for_its_meaning(status):
    category, action, *words = CASES[status]
    with fake_provider() as fake:
        CARRIER["url"] = fake.base_url
        fake.push(_answer(status, {"labelId": "L-1"} if status == 200 else {"error": "no"}))
        run = _run()
    assert run.status == "blocked"
    assert ToolCall.objects.get(run=run).error_class == category
    api = client_for(make_role_users()["operator"]).get(f"/api/runs/{run.pk}").json()
    assert api["recommended_action"] == action, api["recommendation_why"]
    for w in words:
        assert w in api["recommendation_why"]
    if status != 200:
        assert f"HTTP {status}" in api["attention_detail"]
    assert api["same_failure"] is None  # no other run is blocked like it


@pytest.mark.parametrize("error,action,words", [
    (le.ToolCredentialsRefused("carrier: API key revoked"), "retry", "fix the credential"),
    (le.ToolApiChanged("carrier: no label_id in the answer"), "retry", "fix it, then retry"),
    (le.ToolRequestInvalid("carrier: weight must be positive"), "terminate", "adapter"),
])
def test_typed_errors_say_the_same(error, action, words):
    CARRIER["raise"] = error
    run = _run()
    assert (run.status, run.recommended_action) == ("blocked", action)
    assert words in run.recommendation_why


def test_runs_refused_the_same_way_are_one_decision():
    users = make_role_users()
    with fake_provider() as fake:
        CARRIER["url"] = fake.base_url
        fake.push(*[_answer(401, {"error": "invalid api key"}) for _ in range(3)],
                  _answer(404, {"error": "no such order"}))
        refused = [_run(n) for n in range(3)]
        other = _run(9)  # same tool, another meaning: not in the group
    assert [r.status for r in refused] == ["blocked"] * 3 and other.status == "blocked"
    api = client_for(users["operator"]).get(f"/api/runs/{refused[0].pk}").json()
    group = api["same_failure"]
    assert (group["others"], group["verb"], group["category"]) == (2, "retry", "credentials")
    assert sorted(group["run_ids"]) == sorted(str(r.pk) for r in refused)
    assert group["text"] == ("2 other runs are blocked on create_label the same way (our "
                             "credentials were refused): one decision for all")
    html = client_for(users["operator"]).get(reverse("console:run", args=[refused[1].pk]))
    text = html.content.decode()
    assert 'data-same-failure="2"' in text and "decide for all 3 at once" in text
    bulk = client_for(users["operator"]).get(group["bulk_url"])
    assert bulk.status_code == 200
    body = bulk.content.decode()
    assert all(str(r.pk) in body for r in refused) and str(other.pk) not in body
    viewer_html = client_for(users["viewer"]).get(reverse("console:run", args=[refused[0].pk]))
    assert "data-same-failure-bulk" not in viewer_html.content.decode()
