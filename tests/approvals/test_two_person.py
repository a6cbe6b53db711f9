"""The two-person rule: ``@tool(approvers=2)`` needs two distinct approvers, never the requester.

Runs wait on the real engine; people decide through the console's decision endpoint (real
requests through the Django test client), and the engine is driven on to count executions.
"""
from __future__ import annotations

import pytest

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from approvals.models import Approval, ApprovalVote, Intervention
from runs.models import Event
from runs.services import run_start
from tests.conftest import drive
from tests.console_factories import client_for, make_user
from tests.engine_agents import world

pytestmark = pytest.mark.django_db


@tool(effect="write", idempotent=True, reversibility="manual", approval="always", approvers=2)
def rotate_key(ctx, service: str, length: int) -> ToolResult:
    """Rotate a service's key (two people approve every rotation)."""
    world.did("rotate_key", ctx.idempotency_key, {"service": service, "length": length})
    return ToolResult(facts={"rotated": service, "length": length})


@pytest.fixture
def people(db):
    """The requester (starts the run) and three approvers in the support role."""
    return {name: make_user(name, *(("support",) if name != "req" else ("operators", "support")))
            for name in ("req", "ann", "ben", "cat")}


@pytest.fixture
def approval(engine, people):
    """A run started by ``req`` waiting for two approvals of rotate_key(db, 32)."""
    registry.register(Agent(
        name="twoperson", version="1", system_prompt="test", tools=[rotate_key],
        plan=[StepSpec("s")], model=lambda: ScriptedModel(
            {"s": [call("rotate_key", service="db", length=32), say("rotated")]})))
    run = run_start(agent="twoperson", goal="rotate", actor=people["req"])
    assert drive(run) == "waiting"
    return Approval.objects.get(run=run)


def decide(person, approval, verb="approve", **data):
    """POST a console decision as ``person``; return the inbox page it lands on."""
    page = client_for(person).post(f"/approvals/{approval.pk}/{verb}/", data, follow=True)
    return page.content.decode()


def state(approval):
    approval.refresh_from_db()
    return approval.status


def test_the_tool_runs_once_only_after_the_second_distinct_approval(approval, people):
    html = decide(people["ann"], approval)
    assert "rotate_key: approved by ann: 1 of 2 approvals; another person must approve" in html
    assert state(approval) == "pending" and drive(approval.run) == "waiting"
    assert world.count("rotate_key") == 0
    decide(people["ben"], approval)
    assert state(approval) == "approved" and approval.decided_by.username == "ben"
    assert drive(approval.run) == "succeeded"
    assert world.count("rotate_key") == 1
    assert Event.objects.filter(run=approval.run, type="approval.voted").count() == 1


def test_the_requester_never_counts(approval, people):
    html = decide(people["req"], approval)
    assert "you asked for this approval; someone else must decide it" in html
    assert not ApprovalVote.objects.exists() and state(approval) == "pending"


def test_the_same_person_twice_is_refused(approval, people):
    decide(people["ann"], approval)
    html = decide(people["ann"], approval)
    assert "you already approved this; it needs 2 different approvers, so someone else " \
           "must approve it" in html
    assert state(approval) == "pending" and ApprovalVote.objects.count() == 1
    assert world.count("rotate_key") == 0


def test_an_approval_on_older_arguments_is_stale_and_does_not_count(approval, people):
    decide(people["ann"], approval)  # approves length 32
    html = decide(people["ben"], approval, "edit_args",
                  args='{"service": "db", "length": 64}')
    assert "1 of 2 approvals" in html  # ben's own, on the edited version; ann's is stale
    assert state(approval) == "pending" and approval.version == 2
    inbox = client_for(people["cat"]).get("/approvals/").content.decode()
    assert "1 of 2 approvals" in inbox and "ben" in inbox
    assert "ann (on older arguments: does not count)" in inbox
    decide(people["ann"], approval)  # ann approves the edited version: that counts
    assert state(approval) == "approved"
    assert drive(approval.run) == "succeeded"
    assert [e[2] for e in world.effects if e[0] == "rotate_key"] == [
        {"service": "db", "length": 64}]


def test_one_reject_rejects(approval, people):
    decide(people["ann"], approval)
    decide(people["ben"], approval, "reject", reason="rotation freeze this week")
    assert state(approval) == "rejected"
    assert drive(approval.run) in ("succeeded", "completed_with_exceptions")
    assert world.count("rotate_key") == 0
    row = Intervention.objects.get(action="approval.reject")
    assert row.actor.username == "ben" and row.data["channel"] == "console"


def test_the_inbox_shows_who_approved_and_hides_approve_from_them(approval, people):
    decide(people["ann"], approval)
    ann = client_for(people["ann"]).get("/approvals/").content.decode()
    assert "1 of 2 approvals" in ann and "approved by ann" in ann
    assert f"/approvals/{approval.pk}/approve/" not in ann
    assert f"/approvals/{approval.pk}/approve/" in \
        client_for(people["ben"]).get("/approvals/").content.decode()


def test_approvers_needs_an_approval_mode():
    with pytest.raises(ValueError, match="approvers=2 needs approval="):
        tool(lambda ctx, x: None, name="t", parameters={"type": "object"}, approvers=2)
    with pytest.raises(ValueError, match="approvers must be a whole number from 1 to 5"):
        tool(lambda ctx, x: None, name="t", parameters={"type": "object"},
             approval="always", approvers=0)


def test_the_api_counts_approvals_and_records_its_channel(approval, people):
    from django.test import Client

    from approvals.apikeys import apikey_create

    _, key = apikey_create(user=people["ann"], name="ci")
    api = Client(headers={"Authorization": f"Bearer {key}"})
    body = api.post(f"/api/approvals/{approval.pk}/decide", {"decision": "approve"},
                    content_type="application/json").json()
    assert (body["status"], body["approvals"], body["approvers_required"]) == ("pending", 1, 2)
    again = api.post(f"/api/approvals/{approval.pk}/decide", {"decision": "approve"},
                     content_type="application/json")
    assert again.status_code == 403
    assert "you already approved this" in again.json()["error"]["message"]
    assert Intervention.objects.get(action="approval.approve").data["channel"] == "api"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_approvers_at_the_same_moment_both_count_and_it_runs_once(approval, people):
    import threading

    from django.db import connection

    barrier, pages = threading.Barrier(2), {}

    def press(name: str) -> None:
        try:
            barrier.wait()
            pages[name] = decide(people[name], approval)
        finally:
            connection.close()

    threads = [threading.Thread(target=press, args=(n,)) for n in ("ann", "ben")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert state(approval) == "approved" and ApprovalVote.objects.count() == 2
    assert sum("1 of 2 approvals" in p for p in pages.values()) == 1
    assert drive(approval.run) == "succeeded"
    assert world.count("rotate_key") == 1


def test_a_decision_link_gives_the_second_approval(approval, people, settings):
    from django.test import Client

    from approvals.links import approval_links

    settings.AGENTOPS_SITE_URL = "https://ops.example.com"
    decide(people["ann"], approval)
    ann_link = approval_links(approval=approval, recipient=people["ann"]).approve_url
    again = Client().post(ann_link.removeprefix("https://ops.example.com"))
    assert again.status_code == 403 and "You already approved this" in again.content.decode()
    ben_link = approval_links(approval=approval, recipient=people["ben"]).approve_url
    page = Client().get(ben_link.removeprefix("https://ops.example.com")).content.decode()
    assert "1 of 2 approvals</strong> (different people) · approved by ann" in page
    done = Client().post(ben_link.removeprefix("https://ops.example.com")).content.decode()
    assert "rotate_key: approved by ben; the call runs now." in done
    assert drive(approval.run) == "succeeded" and world.count("rotate_key") == 1
