"""The Slack-compatible interaction endpoint: signature, replay window, replays, user mapping.

Each request is a real POST through the Django test client with a form-encoded ``payload``
signed as Slack signs it; the run behind the approval waits on the real engine.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import time
from urllib.parse import urlencode

import pytest
from django.test import Client

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from approvals.links import approval_links
from approvals.models import Approval, Intervention
from runs.services import run_start
from tests.conftest import drive
from tests.engine_agents import world

pytestmark = pytest.mark.django_db
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
URL = "/integrations/slack/interactions/"


@tool(effect="write", idempotent=True, reversibility="manual", approval="always")
def announce(ctx, text: str) -> ToolResult:
    """Post an announcement (a person approves each; not high-risk: no typed amount)."""
    world.did("announce", ctx.idempotency_key, {"text": text})
    return ToolResult(facts={"posted": text})


@pytest.fixture
def approval(engine, users, settings):
    """A pending approval of an announcement; Slack user U1 is support, U2 a viewer."""
    settings.AGENTOPS_SLACK_SIGNING_SECRET = SECRET
    settings.AGENTOPS_SLACK_USERS = {"U1": "support", "U2": "viewer"}
    registry.register(Agent(
        name="slacky", version="1", system_prompt="test", tools=[announce],
        plan=[StepSpec("s")],
        model=lambda: ScriptedModel({"s": [call("announce", text="hi"), say("posted")]})))
    run = run_start(agent="slacky", goal="g")
    assert drive(run) == "waiting"
    return Approval.objects.get(run=run)


def press(approval, *, user="U1", verb="approve", ts=None, secret=SECRET, value=None,
          client=None, email="", raw=None):
    """POST one signed block_actions press (or ``raw`` as the payload); return the response."""
    links = approval_links(approval=approval, recipient=_any())
    payload = {"type": "block_actions", "user": {"id": user, "username": user, "email": email},
               "response_url": "https://hooks.example/r",
               "actions": [{"action_id": verb, "value": value or getattr(links, f"{verb}_value")}]}
    body = urlencode({"payload": raw if raw is not None else json.dumps(payload)})
    ts = str(int(time.time()) if ts is None else ts)
    sig = "v0=" + hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(),
                           hashlib.sha256).hexdigest()
    return (client or Client()).post(URL, body, content_type="application/x-www-form-urlencoded",
                                     HTTP_X_SLACK_REQUEST_TIMESTAMP=ts,
                                     HTTP_X_SLACK_SIGNATURE=sig)


def _any():
    from django.contrib.auth.models import User

    return User.objects.get(username="support")


def test_a_signed_press_approves_as_the_mapped_user_and_the_call_runs_once(approval):
    answer = press(approval)
    assert answer.status_code == 200
    assert answer.json() == {"replace_original": True,
                             "text": "announce: approved by support; the call runs now."}
    row = Intervention.objects.get(action="approval.approve")
    assert row.actor.username == "support" and row.data["channel"] == "slack"
    assert drive(approval.run) == "succeeded"
    assert [e[0] for e in world.effects].count("announce") == 1


def test_a_bad_signature_is_refused(approval):
    answer = press(approval, secret="not-the-secret")
    assert answer.status_code == 401
    assert "X-Slack-Signature does not match" in answer.json()["error"]
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_an_old_timestamp_is_refused(approval):
    answer = press(approval, ts=int(time.time()) - 6 * 60)
    assert answer.status_code == 401
    assert "more than 300 s" in answer.json()["error"]
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_a_replayed_request_acts_nothing(approval):
    Approval.objects.filter(pk=approval.pk).update(approvers_required=2)
    ts = int(time.time())
    first = press(approval, ts=ts)
    assert "1 of 2 approvals" in first.json()["text"]
    replay = press(approval, ts=ts)  # same body, same timestamp, same signature
    assert replay.status_code == 200 and replay.json()["response_type"] == "ephemeral"
    assert "already handled (a replay)" in replay.json()["text"]
    assert Intervention.objects.filter(action="approval.approve").count() == 1


def test_an_unmapped_user_and_a_user_without_the_role_are_refused(approval):
    stranger = press(approval, user="U9")
    assert "Slack user U9 is not mapped" in stranger.json()["text"]
    viewer = press(approval, user="U2")
    assert "approve needs the support role" in viewer.json()["text"]
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_a_press_after_the_arguments_changed_is_refused(approval):
    value = approval_links(approval=approval, recipient=_any()).approve_value
    Approval.objects.filter(pk=approval.pk).update(version=2)
    answer = press(approval, value=value)
    assert "arguments of this approval changed" in answer.json()["text"]


def test_reject_answers_with_the_pressers_link_to_give_a_reason(approval):
    answer = press(approval, verb="reject").json()
    assert answer["response_type"] == "ephemeral" and "a rejection needs a reason" in answer["text"]
    link = answer["text"].split("finish here: ")[1]
    page = Client().get(link.removeprefix("http://localhost:8000"))
    assert "For <strong>support</strong>" in page.content.decode()
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_without_a_signing_secret_the_endpoint_is_off(approval, settings):
    settings.AGENTOPS_SLACK_SIGNING_SECRET = ""
    answer = press(approval)
    assert answer.status_code == 503 and "AGENTOPS_SLACK_SIGNING_SECRET" in answer.json()["error"]


def test_an_unlisted_slack_user_is_matched_by_email(approval, users):
    users["support"].email = "Sup@Example.com"
    users["support"].save(update_fields=["email"])
    answer = press(approval, user="U7", email="sup@example.com").json()
    assert answer["text"] == "announce: approved by support; the call runs now."


@pytest.mark.parametrize("raw", ["not json", '{"type": "block_actions", "actions": []}',
                                 '{"type": "view_submission", "user": {"id": "U1"}, '
                                 '"actions": [{"value": "approve:1:x"}]}'])
def test_a_malformed_payload_is_refused_saying_what_was_expected(approval, raw):
    answer = press(approval, raw=raw).json()
    assert answer["response_type"] == "ephemeral"
    assert "not a block_actions press" in answer["text"] or "names no approval" in answer["text"]
    assert Approval.objects.get(pk=approval.pk).status == "pending"
