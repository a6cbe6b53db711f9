"""Notifications end to end: the engine writes the outbox, the sender talks to real servers."""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json

import pytest
from django.contrib.auth.models import User

from agentops import clock
from approvals.models import Delivery, DeliveryAttempt, NotifyRule
from approvals.notify.sender import deliveries_send
from approvals.notify.transports import message_id
from tests.approvals.conftest import approval_run, blocked_run
from tests.clock_helpers import clock_reads
from tests.approvals.notify.conftest import SECRET, group_with

pytestmark = pytest.mark.django_db


def test_an_approval_emails_each_member_of_its_group_through_a_real_smtp_server(engine,
                                                                             channels):
    box, _ = channels
    payments = group_with("payments", "ann@example.com", "bo@example.com")
    User.objects.create(username="noaddress").groups.add(payments)
    NotifyRule.objects.create(name="pay", subject="approval", tool="pay", group=payments,
                              channel="mail")
    run = approval_run()
    a = run.approvals.get()
    assert a.assigned_group == payments
    rows = list(Delivery.objects.filter(approval=a).order_by("recipient"))
    assert [d.recipient for d in rows] == ["ann@example.com", "bo@example.com"]
    assert not box.messages  # owed, not yet sent: the workers send
    assert sorted(deliveries_send()) == sorted(d.pk for d in rows)
    assert sorted(m["To"] for m in box.messages) == ["ann@example.com", "bo@example.com"]
    msg = next(m for m in box.messages if m["To"] == "ann@example.com")
    ann = next(d for d in rows if d.recipient == "ann@example.com")
    assert msg["Message-ID"].strip() == message_id(ann.key)
    assert "pay" in msg["Subject"] and str(run.pk)[:8] in msg["Subject"]
    text = msg.get_body(preferencelist=("plain",)).get_content()
    assert '"amount": 5' in text and f"http://console.test/approvals/?focus={a.pk}" in text
    assert "Approve: http://console.test/decide/" in text
    assert "Reject: http://console.test/decide/" in text
    ann.refresh_from_db()
    assert ann.status == "sent" and ann.sent_at is not None
    assert list(ann.tries.values_list("n", "status")) == [(1, "ok")]
    assert deliveries_send() == []  # nothing is sent twice


def test_the_inbox_shows_the_group_an_approval_is_assigned_to(engine, channels, client):
    from tests.console_factories import make_user

    NotifyRule.objects.create(name="pay", subject="approval", group=group_with("payments"),
                              channel="mail")
    approval_run()
    client.force_login(make_user("sue", "support"))
    html = client.get("/approvals/").content.decode()
    assert "data-assigned>assigned to payments<" in html


def test_a_blocked_run_posts_to_a_chat_webhook_with_a_console_button(engine, channels):
    _, recv = channels
    NotifyRule.objects.create(name="stuck", subject="stuck", failure_class="permanent_error",
                              channel="chat")
    NotifyRule.objects.create(name="other", subject="stuck", failure_class="loop_detected",
                              channel="hook")
    run = blocked_run()
    assert run.attention_reason == "permanent_error"
    d = Delivery.objects.get(run=run)
    assert d.channel == "chat" and d.stage == "notify"
    deliveries_send()
    (req,) = recv.requests
    body = req["json"]
    assert req["headers"]["Idempotency-Key"] == d.key
    assert "permanent_error" in body["text"]
    (button,) = body["blocks"][1]["elements"]
    assert button["url"] == f"http://console.test/runs/{run.pk}/"


def test_an_approval_in_chat_has_approve_and_reject_buttons_the_interaction_reads(engine,
                                                                                 channels):
    from approvals.links import approval_fingerprint

    _, recv = channels
    NotifyRule.objects.create(name="chat", subject="approval", channel="chat")
    run = approval_run()
    a = run.approvals.get()
    deliveries_send()
    (req,) = recv.requests
    approve, reject, open_ = req["json"]["blocks"][1]["elements"]
    fp = approval_fingerprint(a)
    assert (approve["action_id"], approve["value"], approve["style"]) == (
        "approve", f"approve:{a.pk}:{fp}", "primary")
    assert (reject["action_id"], reject["value"]) == ("reject", f"reject:{a.pk}:{fp}")
    assert open_["url"] == f"http://console.test/approvals/?focus={a.pk}"


def test_a_webhook_is_signed_retried_with_backoff_and_each_attempt_logged(engine, channels):
    _, recv = channels
    recv.statuses = [503]
    NotifyRule.objects.create(name="hook", subject="approval", channel="hook")
    run = approval_run()
    d = Delivery.objects.get(run=run)
    deliveries_send()
    d.refresh_from_db()
    assert d.status == "pending" and d.next_at > clock.now() and "HTTP 503" in d.last_error
    assert deliveries_send() == []  # not due again before its backoff
    later = d.next_at + dt.timedelta(seconds=1)
    with clock_reads(lambda: later):
        assert deliveries_send() == [d.pk]
    d.refresh_from_db()
    assert d.status == "sent"
    assert list(d.tries.values_list("n", "status", "response")) == [
        (1, "error", ""), (2, "ok", "HTTP 200")]
    first, second = recv.requests
    assert first["raw"] == second["raw"] or first["json"]["id"] == second["json"]["id"]
    h = second["headers"]
    signed = hmac.new(SECRET.encode(), h["X-AgentOps-Timestamp"].encode() + b"." + second["raw"],
                      hashlib.sha256).hexdigest()
    assert h["X-AgentOps-Signature"] == f"sha256={signed}"
    assert h["Idempotency-Key"] == d.key == second["json"]["id"]
    assert second["json"]["args"] == {"to": "bob", "amount": 5}
    assert len(recv.effective) == 1


def test_a_refusal_is_not_retried_and_an_undeclared_channel_fails_naming_it(engine, channels):
    _, recv = channels
    recv.statuses = [400]
    NotifyRule.objects.create(name="hook", subject="approval", channel="hook")
    NotifyRule.objects.create(name="gone", subject="approval", channel="pager")
    run = approval_run()
    deliveries_send()
    hook, gone = (Delivery.objects.get(run=run, channel=c) for c in ("hook", "pager"))
    assert hook.status == "failed" and "HTTP 400" in hook.last_error
    assert gone.status == "failed"
    assert "channel 'pager' is not declared" in gone.last_error and "chat, hook, mail" in \
        gone.last_error
    assert DeliveryAttempt.objects.filter(delivery__run=run).count() == 2


def test_without_rules_an_approval_reaches_only_the_console(engine, channels):
    box, recv = channels
    run = approval_run()
    assert run.approvals.get().assigned_group is None
    assert not Delivery.objects.exists()
    assert deliveries_send() == [] and not box.messages and not recv.requests


def test_a_message_written_twice_for_one_cause_is_one_delivery(engine, channels):
    from approvals.notify.outbox import deliveries_write

    NotifyRule.objects.create(name="hook", subject="approval", channel="hook")
    run = approval_run()
    d = Delivery.objects.get(run=run)
    rule = NotifyRule.objects.get()
    deliveries_write(track=d.track, rule=rule, stage="notify", group_id=None)
    assert Delivery.objects.filter(run=run).count() == 1
    assert json.dumps(d.key)  # the key is what the receiver dedupes by


def test_the_run_panel_shows_who_was_notified_when_and_the_sla_clock(engine, channels, client):
    from tests.console_factories import make_user

    support = group_with("payments", "ann@example.com")
    NotifyRule.objects.create(name="pay", subject="approval", group=support, channel="mail",
                              sla_s=600)
    run = approval_run()
    deliveries_send()
    client.force_login(make_user("op", "operators"))
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "ann@example.com" in html and 'data-delivery="sent"' in html and "#1 ok" in html
    assert "data-sla" in html and "reminder due" in html and "payments" in html
    (row,) = client.get(f"/api/notify/deliveries?run_id={run.pk}").json()
    assert row["recipient"] == "ann@example.com" and row["status"] == "sent"
    assert [(t["n"], t["status"]) for t in row["tries"]] == [(1, "ok")]


def test_a_message_that_cannot_be_built_is_an_error_attempt_and_the_others_still_go(
        engine, channels, monkeypatch):
    from approvals.notify import sender

    _, recv = channels
    NotifyRule.objects.create(name="hook", subject="approval", channel="hook")
    NotifyRule.objects.create(name="chat", subject="approval", channel="chat")
    approval_run()
    real = sender.message_for

    def broken_for_hook(d):
        if d.channel == "hook":
            raise KeyError("a template field")
        return real(d)

    monkeypatch.setattr(sender, "message_for", broken_for_hook)
    deliveries_send()
    hook, chat = (Delivery.objects.get(channel=c) for c in ("hook", "chat"))
    assert chat.status == "sent" and len(recv.requests) == 1
    assert hook.status == "pending" and "internal error: KeyError" in hook.last_error
    assert list(hook.tries.values_list("status", flat=True)) == ["error"]


def test_a_notice_is_owed_only_when_its_cause_commits(engine, channels, run):
    from django.db import transaction

    from runs.engine.runtime.transition import run_transition

    _, recv = channels
    NotifyRule.objects.create(name="stuck", subject="stuck", channel="chat")

    class Crashed(Exception):
        """The unit's transaction fails after the move was written."""

    with pytest.raises(Crashed), transaction.atomic():
        run_transition(run, "blocked", reason="permanent_error", detail="no access")
        assert Delivery.objects.filter(run=run).count() == 1  # written with the move ...
        raise Crashed
    run.refresh_from_db()
    assert run.status == "queued" and not Delivery.objects.exists()  # ... and gone with it
    run_transition(run, "blocked", reason="permanent_error", detail="no access")
    assert deliveries_send() and len(recv.requests) == 1
