"""SLA clocks through the sweeper: remind the group, then escalate to the next one."""
from __future__ import annotations

import datetime as dt
import re

import pytest

from agentops import clock
from approvals.actions import ACTIONS
from approvals.models import Delivery, NotifyRule, NotifyTrack
from approvals.notify.sender import deliveries_send
from runs.sweeper import sweep_once
from tests.approvals.conftest import approval_run, blocked_run
from tests.approvals.notify.conftest import group_with
from tests.clock_helpers import clock_reads

pytestmark = pytest.mark.django_db


def later(seconds: float) -> dt.datetime:
    return clock.now() + dt.timedelta(seconds=seconds)


def test_an_undecided_approval_reminds_then_escalates_to_the_next_group(engine, channels):
    box, _ = channels
    first = group_with("payments", "ann@example.com")
    managers = group_with("managers", "max@example.com")
    NotifyRule.objects.create(name="pay", subject="approval", group=first, channel="mail",
                              sla_s=60, escalate_to=managers)
    run = approval_run()
    a = run.approvals.get()
    deliveries_send()
    assert [m["To"] for m in box.messages] == ["ann@example.com"]
    assert sweep_once().escalations == []  # SLA not passed yet
    t1 = later(61)
    with clock_reads(lambda: t1):
        assert len(sweep_once().escalations) == 1
        deliveries_send()
    remind = box.messages[-1]
    assert remind["To"] == "ann@example.com" and remind["Subject"].startswith("Reminder: ")
    t2 = t1 + dt.timedelta(seconds=61)
    with clock_reads(lambda: t2):
        sweep_once()
        deliveries_send()
    esc = box.messages[-1]
    assert esc["To"] == "max@example.com" and esc["Subject"].startswith("Escalated: ")
    a.refresh_from_db()
    assert a.assigned_group == managers
    assert list(Delivery.objects.filter(approval=a).order_by("id").values_list(
        "stage", "recipient")) == [("notify", "ann@example.com"), ("remind", "ann@example.com"),
                                   ("escalate", "max@example.com")]
    with clock_reads(lambda: t2 + dt.timedelta(seconds=600)):
        sweep_once()
        assert deliveries_send() == []  # nothing after the escalation
    assert len(box.messages) == 3


def test_a_decided_approval_stops_its_clock_and_nobody_is_reminded(engine, channels, users):
    box, _ = channels
    g = group_with("payments", "ann@example.com")
    NotifyRule.objects.create(name="pay", subject="approval", group=g, channel="mail", sla_s=60)
    run = approval_run()
    ACTIONS["approve"].execute(users["support"], run.approvals.get(), "")
    t = later(120)
    with clock_reads(lambda: t):
        sweep_once()
        deliveries_send()
    assert [d.stage for d in Delivery.objects.all()] == ["notify"]
    assert NotifyTrack.objects.get().closed_at is not None


def test_a_run_still_blocked_after_its_sla_reminds_on_the_chat_channel(engine, channels):
    _, recv = channels
    NotifyRule.objects.create(name="stuck", subject="stuck", channel="chat", sla_s=30)
    run = blocked_run()
    t = later(31)
    with clock_reads(lambda: t):
        sweep_once()
        deliveries_send()
    first, second = (r["json"]["text"] for r in recv.requests)
    assert first.startswith(f"Run {str(run.pk)[:8]} needs a person: permanent_error")
    assert second.startswith(f"Reminder: Run {str(run.pk)[:8]} needs a person")


def test_an_approval_asked_again_after_expiry_is_routed_and_notified_again(engine, channels):
    from approvals.models import Approval

    box, _ = channels
    g = group_with("payments", "ann@example.com")
    NotifyRule.objects.create(name="pay", subject="approval", group=g, channel="mail")
    run = approval_run()
    first = run.approvals.get()
    Approval.objects.filter(pk=first.pk).update(expires_at=later(-1), expiry_outcome="rerequest")
    sweep_once()
    fresh = Approval.objects.get(run=run, status="pending")
    assert fresh.pk != first.pk and fresh.assigned_group == g
    deliveries_send()
    assert [m["To"] for m in box.messages] == ["ann@example.com"] * 2
    assert Delivery.objects.filter(approval=fresh).count() == 1


def test_the_panel_names_the_next_step_of_the_clock_after_the_reminder(engine, channels, client):
    from tests.console_factories import make_user

    managers = group_with("managers", "max@example.com")
    NotifyRule.objects.create(name="pay", subject="approval", group=group_with("payments"),
                              channel="mail", sla_s=60, escalate_to=managers)
    NotifyRule.objects.create(name="stuck", subject="stuck", channel="chat", sla_s=60)
    paying, stuck = approval_run(), blocked_run()
    client.force_login(make_user("op", "operators"))

    def sla(run) -> str:
        html = client.get(f"/runs/{run.pk}/").content.decode()
        return " ".join(re.search(r"<p data-sla>(.*?)</p>", html, re.S).group(1).split())

    assert sla(paying).startswith("SLA: reminder due <time")
    t = later(61)
    with clock_reads(lambda: t):
        sweep_once()
        assert "escalation to <strong>managers</strong> due <time" in sla(paying)
        # No group to escalate to: the panel does not promise an escalation.
        assert "escalation" not in sla(stuck) and "the rule escalates to no group" in sla(stuck)
    with clock_reads(lambda: t + dt.timedelta(seconds=61)):
        sweep_once()
        assert sla(paying).startswith("SLA: <strong>overdue</strong> (escalated)")
        assert sla(stuck).startswith("SLA: <strong>overdue</strong>")
