"""The run panel shows the recommendation as a button the viewer can press, through HTTP.

Runs are produced by the engine (the labelled scenarios); the buttons are pressed through the
console's confirm form, as a person would.
"""
from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from approvals.models import Intervention
from ledger.models import ToolCall
from runs.models import Run
from tests.conftest import drive
from tests.console_factories import client_for
from tests.triage import scenarios_blocked as blocked
from tests.triage import scenarios_other as other
from tests.triage.world import world

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _clean_world(engine):
    """A clean fault-injecting world per test."""
    world.reset()
    yield
    world.reset()


def _user(name: str, role: str) -> User:
    user = User.objects.create(username=name)
    user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


def _panel(run: Run, user: User) -> str:
    return client_for(user).get(reverse("console:run", args=[run.pk])).content.decode()


def _buttons(html: str) -> list[str]:
    return re.findall(r'class="btn ([a-z ]*)"[^>]*data-verb="(\w+)"', html)


def _press(run: Run, user: User, verb: str):
    run.refresh_from_db()
    return client_for(user).post(reverse("console:run_action", args=[run.pk, verb]),
                                 {"reason": "triage test", "seen_seq": run.last_seq})


def test_an_operator_is_told_to_ask_an_admin_for_a_budget():
    run = blocked.budget_used_up_halfway()
    html = _panel(run, _user("op", "operators"))
    assert "Ask an admin to press Raise budget" in html
    assert "raise_budget" not in [v for _, v in _buttons(html)]
    admin_html = _panel(run, _user("boss", "admins"))
    assert ("primary", "raise_budget") in _buttons(admin_html)
    assert "1 of 2 steps done" in admin_html


def test_a_rate_limited_wait_says_why_until_when_and_can_be_woken_now():
    run = other.carrier_rate_limit_with_retry_after_an_hour()
    op = _user("op", "operators")
    html = _panel(run, op)
    assert "No action needed: it retries by itself" in html
    assert "retry poll after rate_limited" in html and "UTC" in html
    assert [v for _, v in _buttons(html)] == ["wake", "terminate", "edit_plan", "restart",
                                            "finish_partial"]
    assert _press(run, op, "wake").status_code == 302
    run.refresh_from_db()
    assert run.status == "queued"
    assert drive(run) == "succeeded"
    assert ToolCall.objects.get(run=run, tool="poll").status == "succeeded"


def test_wake_now_is_refused_for_an_approval_wait():
    from agentops.llm.scripted import call, say
    from tests.triage.scenarios import start

    run = start("t-console-approval", {"pay": [call("pay", to="s", amount=5), say("ok")]})
    op = _user("op", "operators")
    assert "wake" not in [v for _, v in _buttons(_panel(run, op))]
    assert _press(run, op, "wake").status_code == 403


def test_version_gone_continues_on_the_deployed_version():
    run = blocked.version_gone_with_a_newer_version_deployed()
    op = _user("op", "operators")
    buttons = _buttons(_panel(run, op))
    assert buttons[0] == ("primary", "fork_deployed")
    assert "retry" not in [v for _, v in buttons]  # a retry would block again
    assert _press(run, op, "retry").status_code == 403
    assert _press(run, op, "fork_deployed").status_code == 302
    run.refresh_from_db()
    fork = Run.objects.get(forked_from=run)
    assert run.status == "cancelled"
    audit = Intervention.objects.get(run=run, action="run.fork_deployed")
    assert audit.data["fork"] == str(fork.pk) and audit.data["to_version"] == "2"
    assert fork.agent_version == "2"
    assert drive(fork) == "succeeded"


@pytest.mark.parametrize("build,label", [
    (other.email_timed_out_after_sending, "It executed"),
    (other.email_connection_refused_at_once, "It did not execute"),
])
def test_confirm_names_the_button_the_evidence_favours(build, label):
    run = build()
    html = _panel(run, _user("op", "operators"))
    assert f"<strong class=\"rec\">{label}</strong>" in html
    assert f"{label} is likelier" in html
    primary = [v for cls, v in _buttons(html) if "primary" in cls]
    assert primary == [run.recommended_action]
