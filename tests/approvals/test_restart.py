"""Restart a task from its input: a new linked run, the old one "restarted as", a true preview."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from approvals.models import Intervention
from ledger.models import ToolCall
from runs.models import Event, Run
from tests.approvals.conftest import blocked_run
from tests.conftest import drive
from tests.console_factories import client_for
from tests.engine_agents import world

pytestmark = pytest.mark.django_db


def test_restart_from_an_edited_input_through_the_dialog(engine, users):
    run = blocked_run("rst")
    client = client_for(users["operator"])
    url = reverse("console:run_action", args=[run.pk, "restart"])
    dialog = client.get(url).content.decode()
    reserve = ToolCall.objects.get(run=run, tool="reserve")
    row = re.search(rf'<tr data-call="{reserve.tool_call_id}">(.*?)</tr>', dialog, re.S).group(1)
    assert "idempotent" in row and "makes it again with a new key" in row
    assert 'name="confirm"' in dialog  # it ends this run and repeats its effects
    refused = client.post(url, {"reason": "wrong region", "input": '{"region": "eu2"}',
                                "seen_seq": run.last_seq})
    assert refused.status_code == 422
    run.refresh_from_db()
    assert run.status == "blocked" and not Run.objects.filter(restarted_from=run).exists()

    world.fail_next.clear()
    response = client.post(url, {"reason": "wrong region", "input": '{"region": "eu2"}',
                                 "confirm": "restart", "seen_seq": run.last_seq})
    assert response.status_code == 302, response.content.decode()[:2000]
    run.refresh_from_db()
    new = Run.objects.get(restarted_from=run)
    assert run.status == "cancelled"
    assert Event.objects.get(run=run, type="run.cancelled").data["reason"].startswith(
        f"restarted as {new.pk} from an edited input: wrong region")
    assert new.input == {"region": "eu2"} and new.goal == run.goal
    assert Intervention.objects.get(run=run).data["restarted_as"] == str(new.pk)
    page = client.get(reverse("console:run", args=[run.pk])).content.decode()
    assert f"/runs/{new.pk}/" in page and "Restarted as" in page
    assert drive(new) == "succeeded"
    assert world.count("reserve") == 2  # made again, as the preview said, with a new key
    assert len({key for tool, key, _ in world.effects if tool == "reserve"}) == 2


def test_restart_over_the_api_keeps_the_original_input(engine, users):
    run = blocked_run("rsa")
    client = client_for(users["operator"])
    body = {"action": "restart", "reason": "start over", "params": {}}
    missing = client.post(f"/api/runs/{run.pk}/actions", body, content_type="application/json")
    assert missing.status_code == 422
    assert missing.json()["error"]["code"] == "confirmation_required"
    done = client.post(f"/api/runs/{run.pk}/actions", {**body, "confirm": "restart"},
                       content_type="application/json")
    assert done.status_code == 200, done.content
    new = Run.objects.get(pk=done.json()["changes"]["restarted_as"])
    assert new.input == run.input and done.json()["changes"]["edited_input"] is False
    assert done.json()["run"]["status"] == "cancelled"
    linked = client.get(f"/api/runs/{new.pk}").json()
    assert linked["restarted_from_id"] == str(run.pk)


def test_the_api_preview_lists_what_a_restart_repeats(engine, users):
    run = blocked_run("rsp")
    body = client_for(users["operator"]).post(
        f"/api/runs/{run.pk}/actions/preview", {"action": "restart", "params": {}},
        content_type="application/json").json()
    assert body["confirm"] == "restart"
    lines = {line["tool"]: line for line in body["calls"]}
    assert lines["reserve"]["effect_class"] == "idempotent"
    assert lines["reserve"]["consequence"]["may_repeat"] is True
    assert lines["reserve"]["consequence"]["key"] == "new"
    assert not Run.objects.filter(restarted_from=run).exists()
