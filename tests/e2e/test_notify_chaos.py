"""Chaos for the outbox: SIGKILL the sending worker before and after the wire send.

The approval and its deliveries are committed by a real engine tick in this process; real
worker processes (``agentops worker``) send them to a real SMTP server and a real HTTP
receiver on localhost. Killed before the send: nothing is lost and the message arrives once.
Killed after the send and before the record: the message is sent again (at least once), the
delivery row stays one, and the repeat carries the same key (Message-ID, Idempotency-Key),
so the receiver keeps one.
"""
from __future__ import annotations

import json
import threading

import pytest
from django.contrib.auth.models import Group, User

from approvals.models import Delivery, NotifyRule
from approvals.notify.transports import message_id
from tests.approvals.conftest import approval_run
from tests.e2e.workers import Worker, wait_until
from tests.notify_servers import receiver_running, smtp_running

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SECRET = "chaos-secret-for-the-hmac"


@pytest.fixture
def servers():
    """A real SMTP server and HTTP receiver for the workers to send to."""
    with smtp_running() as (box, port), receiver_running() as recv:
        yield box, port, recv


def _worker(tmp_path, name: str, port: int, recv) -> Worker:
    channels = {"mail": {"kind": "email"},
                "hook": {"kind": "webhook", "url": recv.url, "secret": SECRET}}
    return Worker(name, tmp_path, AGENTOPS_NOTIFY_CHANNELS=json.dumps(channels),
                  EMAIL_HOST="127.0.0.1", EMAIL_PORT=str(port), AGENTOPS_NOTIFY_TIMEOUT_S="5",
                  AGENTOPS_NOTIFY_CLAIM_S="6", AGENTOPS_NOTIFY_BACKOFF_S="0.5")


def _owed(engine, settings, channel: str) -> Delivery:
    """Commit an approval whose rule owes one delivery on ``channel``; return it."""
    settings.AGENTOPS_NOTIFY_CHANNELS = {
        "mail": {"kind": "email", "url": "", "secret": ""},
        "hook": {"kind": "webhook", "url": "http://127.0.0.1:9/", "secret": SECRET}}
    g = Group.objects.create(name="payments")
    User.objects.create(username="ann", email="ann@example.com").groups.add(g)
    NotifyRule.objects.create(name="pay", subject="approval", group=g, channel=channel)
    approval_run()
    return Delivery.objects.get()


def _attempts(d: Delivery) -> list[tuple[int, str]]:
    return list(d.tries.order_by("n").values_list("n", "status"))


def test_a_worker_killed_before_the_send_loses_nothing_and_sends_once(engine, settings,
                                                                     servers, tmp_path):
    box, port, recv = servers
    d = _owed(engine, settings, "mail")
    box.hold_rcpt = threading.Event()  # the conversation stops before the message is sent
    first = _worker(tmp_path, "a", port, recv)
    first.start()
    try:
        assert box.connected.wait(60), "the worker never connected to the mail server"
        first.kill()
    finally:
        first.stop()
    box.hold_rcpt.set()
    box.hold_rcpt = None
    d.refresh_from_db()
    assert d.status == "sending" and not box.messages
    second = _worker(tmp_path, "b", port, recv)
    second.start()
    try:
        wait_until(lambda: Delivery.objects.filter(pk=d.pk, status="sent").exists(), 60,
                   "the second worker to send the delivery")
    finally:
        second.stop()
    assert [m["To"] for m in box.messages] == ["ann@example.com"]
    assert Delivery.objects.count() == 1
    assert _attempts(d) == [(1, "lost"), (2, "ok")]


@pytest.mark.parametrize("channel", ["hook", "mail"])
def test_a_worker_killed_after_the_send_repeats_it_with_the_same_key(engine, settings,
                                                                    servers, tmp_path,
                                                                    channel):
    box, port, recv = servers
    d = _owed(engine, settings, channel)
    held = recv if channel == "hook" else box
    held.hold_reply = threading.Event()  # it arrived; the answer never reaches the worker
    first = _worker(tmp_path, "a", port, recv)
    first.start()
    try:
        assert held.arrived.wait(60), "the worker never sent the message"
        first.kill()
    finally:
        first.stop()
    held.hold_reply.set()
    held.hold_reply = None
    second = _worker(tmp_path, "b", port, recv)
    second.start()
    try:
        wait_until(lambda: Delivery.objects.filter(pk=d.pk, status="sent").exists(), 60,
                   "the second worker to send the delivery again")
    finally:
        second.stop()
    assert Delivery.objects.count() == 1
    assert _attempts(d) == [(1, "lost"), (2, "ok")]
    if channel == "hook":
        keys = [r["headers"]["Idempotency-Key"] for r in recv.requests]
        assert keys == [d.key, d.key] and len(recv.effective) == 1
    else:
        ids = [m["Message-ID"].strip() for m in box.messages]
        assert ids == [message_id(d.key)] * 2
