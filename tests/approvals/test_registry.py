"""Every surface reads an action's one declaration: buttons, dialog, bulk, API, OpenAPI.

These tests iterate the registry, so a verb added to approvals/actions/ is covered here
without touching this file: if any surface kept its own table, the new verb would be missing.
"""
from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils.html import escape

from agentops.agents import Agent, registry
from agentops.api import api
from agentops.llm.scripted import ScriptedModel
from approvals.actions import BULK_ACTIONS, RUN_ACTIONS, action_for, actions_for
from approvals.actions.params import params_fields
from approvals.errors import UnknownAction
from runs.engine.runtime.events import NewEvent, event_append
from runs.models import Run
from runs.statuses import RunStatus
from tests.console_factories import client_for, make_attention_run, make_tool_call

# Actions that apply to one kind of stop only: a timer wait; a run whose version is gone.
_STATE = {"wake": {"wait_kind": "timer"},
          "fork_deployed": {"attention_reason": "version_mismatch",
                            "agent_name": "registry-fork", "agent_version": "0"}}
registry.register(Agent(name="registry-fork", version="1", system_prompt="p", tools=[],
                        plan=None, model=lambda: ScriptedModel({})))
_PREFERRED = (RunStatus.BLOCKED, RunStatus.UNKNOWN, RunStatus.WAITING, RunStatus.RUNNING,
              RunStatus.QUEUED)


def _run_for(action) -> Run:
    """A run in a status the action declares, with a checkpoint to roll back to."""
    status = next(s for s in _PREFERRED if s in action.statuses)
    # A restart starts the deployed version of the run's agent: one that is deployed.
    agent = "support-returns" if action.verb == "restart" else "support-bot"
    run = make_attention_run(status, reason="budget_exhausted", recommended="", agent=agent)
    Run.objects.filter(pk=run.pk).update(**_STATE.get(action.verb, {}))
    if action.verb == "rollback_terminate":  # offered only when a write can be undone
        make_tool_call(run, tool="refund", status="succeeded", effect="write",
                       reversibility="reversible", step_key="plan")
    event_append(run=run, events=[NewEvent("run.note", {"text": "a"}),
                                  NewEvent("run.note", {"text": "b"})])
    run.refresh_from_db()
    return run


@pytest.mark.parametrize("verb", list(RUN_ACTIONS))
def test_the_console_button_and_dialog_come_from_the_declaration(users, verb):
    action = action_for(verb)
    run = _run_for(action)
    admin = client_for(users["admin"])
    assert action in actions_for(run, users["admin"])
    page = admin.get(reverse("console:run", args=[run.pk])).content.decode()
    assert re.search(rf'data-verb="{verb}"[^>]*>{re.escape(escape(action.label))}</a>', page)
    dialog = admin.get(reverse("console:run_action", args=[run.pk, verb]) + "?to_seq=1")
    assert dialog.status_code == 200
    html = dialog.content.decode()
    assert escape(action.label) in html and escape(action.help) in html
    for field in params_fields(action.params):
        if field.widget != "ticks":  # ticks sit in the preview rows that need them
            assert f'name="{field.name}"' in html, field


@pytest.mark.parametrize("verb", list(RUN_ACTIONS))
def test_a_status_the_action_does_not_declare_gets_no_button(users, verb):
    action = action_for(verb)
    ended = make_attention_run(RunStatus.SUCCEEDED)
    assert action not in actions_for(ended, users["admin"])
    page = client_for(users["admin"]).get(reverse("console:run", args=[ended.pk]))
    assert f'data-verb="{verb}"' not in page.content.decode()
    refused = client_for(users["admin"]).get(reverse("console:run_action", args=[ended.pk, verb]))
    assert refused.status_code == 403


def test_the_bulk_form_offers_exactly_the_bulk_actions(users):
    html = client_for(users["operator"]).get(reverse("console:bulk") + "?tab=blocked").content
    offered = re.findall(r'<option value="(\w+)"', html.decode())
    assert offered == list(BULK_ACTIONS)
    assert all(escape(a.label) in html.decode() for a in BULK_ACTIONS.values())
    run = make_attention_run()
    response = client_for(users["operator"]).post(reverse("console:bulk"), {
        "verb": "rollback", "bulk_reason": "r", "run": [str(run.pk)]})
    assert response.status_code == 422 and "Choose an action" in response.content.decode()


def test_openapi_shows_each_action_s_own_params_schema():
    schema = api.get_openapi_schema()
    body = schema["paths"]["/api/runs/{run_id}/actions"]["post"]["requestBody"]
    mapping = body["content"]["application/json"]["schema"]["discriminator"]["mapping"]
    assert set(mapping) == set(RUN_ACTIONS)
    components = schema["components"]["schemas"]
    for verb, action in RUN_ACTIONS.items():
        variant = components[mapping[verb].rsplit("/", 1)[1]]
        params_ref = variant["properties"]["params"]
        ref = params_ref.get("$ref") or params_ref["allOf"][0]["$ref"]
        declared = components[ref.rsplit("/", 1)[1]].get("properties", {})
        assert set(declared) == set(action.params.model_fields), verb
    bulk = components["BulkActionIn"]["properties"]["action"]
    assert set(bulk["enum"]) == set(BULK_ACTIONS)


@pytest.mark.parametrize("verb", list(RUN_ACTIONS))
def test_the_api_validates_params_with_the_action_s_schema(users, verb):
    from django.test import Client

    run = _run_for(action_for(verb))
    seq = run.last_seq
    client = Client()
    client.force_login(users["admin"])
    response = client.post(f"/api/runs/{run.pk}/actions", {
        "action": verb, "reason": "r", "params": {"no_such_param": 1}},
        content_type="application/json")
    assert response.status_code == 422, response.content
    assert "no_such_param" in response.content.decode()
    run.refresh_from_db()
    assert run.last_seq == seq and run.status != RunStatus.QUEUED  # nothing was done


def test_an_unknown_verb_is_a_404_naming_the_known_ones():
    with pytest.raises(UnknownAction, match="known: .*retry"):
        action_for("reboot")
