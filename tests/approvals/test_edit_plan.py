"""A person edits a run's plan: the dialog's diff, the new plan version, the run going on with it.

Runs are real engine runs (scripted model, tests.engine_agents world); the edit goes through
the console's dialog and the REST API, the run is then driven by the loop.
"""
from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from approvals.models import Intervention
from ledger.errors import ToolPermissionDenied
from ledger.models import ToolCall
from runs.models import Event, Run, Step
from runs.services import run_start
from tests.approvals.conftest import ALL_TOOLS
from tests.conftest import drive
from tests.console_factories import client_for
from tests.engine_agents import world

pytestmark = pytest.mark.django_db
SEEN: list[str] = []


def _seen(text: str) -> Any:
    def reply(ctx: Any) -> Any:
        SEEN.append("\n".join(str(m.get("content") or "") for m in ctx.messages))
        return say(text)

    return reply


def _blocked() -> Run:
    """A run blocked in ``check`` (permission refused) after ``prep`` reserved a book."""
    world.fail_next["lookup"] = [ToolPermissionDenied("no access to region eu")]
    script = {"prep": [call("reserve", item="book"), say("reserved")],
              "check": [call("lookup", item="eu"), _seen("checked")],
              "ship": [_seen("shipped")], "notify": [call("email", to="a@b.c"), say("told")]}
    registry.register(Agent(
        name="editable", version="1", system_prompt="test", tools=ALL_TOOLS,
        plan=[StepSpec("prep"), StepSpec("check", depends_on=("prep",)),
              StepSpec("ship", depends_on=("check",)),
              StepSpec("notify", title="Tell the customer", optional=True)],
        model=lambda: ScriptedModel(script)))
    run = run_start(agent="editable", goal="ship the book")
    assert drive(run) == "blocked"
    return run


def _started(run: Run, after: int) -> list[str]:
    return list(Event.objects.filter(run=run, type="step.started", seq__gt=after)
                .order_by("seq").values_list("data__step", flat=True))


def test_the_dialog_shows_the_diff_and_the_run_goes_on_with_the_edited_plan(engine, users):
    run = _blocked()
    client = client_for(users["operator"])
    url = reverse("console:run_action", args=[run.pk, "edit_plan"])
    page = client.get(reverse("console:run", args=[run.pk])).content.decode()
    assert 'data-verb="edit_plan"' in page
    dialog = client.get(url).content.decode()
    assert re.search(r"data-plan-text>check\nship</textarea>", dialog), dialog
    assert "Declared steps you may add: notify" in dialog
    edit = "notify: say the book ships tomorrow\nship: ship by courier, not post"
    dialog = client.get(url, {"steps": edit}).content.decode()
    rows = dict(re.findall(r'data-plan-step="(\w+)" data-change="(\w+)"', dialog))
    assert rows == {"notify": "added", "ship": "edited", "check": "removed"}
    assert "no longer waits for check" in dialog
    lookup = ToolCall.objects.get(run=run, tool="lookup")
    assert f'data-call="{lookup.tool_call_id}"' not in dialog  # it failed: nothing to cancel

    before = Event.objects.filter(run=run).order_by("-seq").first().seq
    response = client.post(url, {"steps": edit, "reason": "region eu is closed; ship direct",
                                 "seen_seq": run.last_seq})
    assert response.status_code == 302, response.content.decode()[:2000]
    run.refresh_from_db()
    assert run.status == "queued" and run.plan_version == 2
    edited = Event.objects.get(run=run, type="plan.edited")
    assert edited.actor == "operator" and edited.data["removed"] == ["check"]
    assert [s["key"] for s in edited.data["steps"]] == ["prep", "notify", "ship"]
    assert Intervention.objects.get(run=run).action == "run.edit_plan"

    assert drive(run) == "succeeded"
    lookup.refresh_from_db()
    assert lookup.status == "failed"  # as it was: the edit neither ran nor cancelled it
    assert _started(run, before) == ["notify", "ship"]
    assert world.count("reserve") == 1  # the done step was not run again
    assert world.count("email") == 1
    assert "ship by courier, not post" in SEEN[-1]
    assert list(Step.objects.filter(run=run).values_list("key", "status")) == [
        ("prep", "succeeded"), ("notify", "succeeded"), ("ship", "succeeded")]


def test_the_api_edits_instructions_and_refuses_a_done_step_changing_nothing(engine, users):
    run = _blocked()
    client = client_for(users["operator"])
    url = f"/api/runs/{run.pk}/actions"

    def post(steps: list[dict[str, Any]]) -> Any:
        return client.post(url, {"action": "edit_plan", "reason": "fix",
                                 "params": {"steps": steps}}, content_type="application/json")

    refused = post([{"key": "prep", "instructions": "again"}, {"key": "check"}])
    assert refused.status_code == 422
    assert "step prep is done; done steps are never edited" in refused.json()["error"]["message"]
    unknown = post([{"key": "teleport"}])
    assert unknown.status_code == 422 and "known: check, ship, notify" in unknown.json()["error"]["message"]
    run.refresh_from_db()
    assert run.status == "blocked" and run.plan_version == 1
    assert not Event.objects.filter(run=run, type="plan.edited").exists()

    world.fail_next.clear()
    done = post([{"key": "check", "instructions": "look up region eu2 instead"},
                 {"key": "ship"}])
    assert done.status_code == 200, done.content
    assert done.json()["run"]["status"] == "queued"
    assert done.json()["changes"]["diff"][0]["change"] == "edited"
    assert drive(run) == "succeeded"
    assert "## Step instructions (set by a person)\nlook up region eu2 instead" in SEEN[-2]
    assert Event.objects.get(run=run, type="plan.edited").data["plan_version"] == 2


def test_a_support_user_may_not_edit_a_plan(engine, users):
    run = _blocked()
    response = client_for(users["support"]).post(
        f"/api/runs/{run.pk}/actions", {"action": "edit_plan", "reason": "x",
                                        "params": {"steps": [{"key": "ship"}]}},
        content_type="application/json")
    assert response.status_code == 403
    run.refresh_from_db()
    assert run.plan_version == 1 and not Intervention.objects.filter(run=run).exists()


def test_the_api_previews_the_diff_before_anyone_presses(engine, users):
    run = _blocked()
    client = client_for(users["operator"])
    response = client.post(f"/api/runs/{run.pk}/actions/preview",
                           {"action": "edit_plan", "params": {"steps": [
                               {"key": "ship", "instructions": "by courier"}]}},
                           content_type="application/json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["refusal"] == "" and body["confirm"] == ""
    assert [(d["step"], d["change"]) for d in body["diff"]] == [("ship", "edited"),
                                                              ("check", "removed")]
    run.refresh_from_db()
    assert run.status == "blocked" and run.plan_version == 1  # a preview changes nothing
    viewer = client_for(users["viewer"]).post(
        f"/api/runs/{run.pk}/actions/preview", {"action": "edit_plan", "params": {}},
        content_type="application/json").json()
    assert "operator" in viewer["refusal"] and viewer["diff"] == []


def test_editing_a_run_waiting_for_approval_closes_the_approval(engine, users):
    from approvals.models import Approval
    from tests.approvals.conftest import approval_run

    run = approval_run("edw")
    pay = ToolCall.objects.get(run=run, tool="pay")
    lines = client_for(users["operator"]).post(
        f"/api/runs/{run.pk}/actions/preview",
        {"action": "edit_plan", "params": {"steps": [{"key": "s", "instructions": "no pay"}]}},
        content_type="application/json").json()["calls"]
    assert [(ln["tool"], ln["will"]) for ln in lines] == [("pay", "cancelled, never runs")]
    done = client_for(users["operator"]).post(
        f"/api/runs/{run.pk}/actions",
        {"action": "edit_plan", "reason": "do not pay bob",
         "params": {"steps": [{"key": "s", "instructions": "no pay"}]}},
        content_type="application/json")
    assert done.status_code == 200, done.content
    pay.refresh_from_db()
    assert pay.status == "cancelled"
    assert Approval.objects.get(tool_call=pay).status == "stale"
    assert drive(run) == "succeeded" and world.count("pay") == 0
