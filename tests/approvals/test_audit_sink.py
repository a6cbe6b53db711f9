"""The audit stream: every audit row reaches AGENTOPS_AUDIT_SINK, in order, once per sink.

The sink is real: an HTTP receiver or a syslog listener (UDP, TCP) on localhost started by
the test; the sender is the function the workers' stream thread calls.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import re
import threading
import time

import pytest

from django.db import connection

from agentops import clock
from approvals.actions import ACTIONS
from approvals.audit import audit_record
from approvals.audit_declared import SinkDeclarationError, sink_from_setting
from approvals.audit_sink import audit_sink_send
from approvals.models import AuditSinkCursor, Intervention
from tests.approvals.conftest import blocked_run
from tests.clock_helpers import clock_reads
from tests.notify_servers import receiver_running, syslog_running

pytestmark = pytest.mark.django_db
SECRET = "audit-sink-secret-for-tests"
# RFC 5424: <PRI>VERSION TIMESTAMP HOSTNAME APP-NAME PROCID MSGID [SD] MSG
SYSLOG = re.compile(rb'^<(\d+)>1 (\S+) (\S+) agentops (\d+) audit '
                    rb'\[agentops@32473 id="(\d+)" cursor="(\d+)" action="([^"]*)" '
                    rb'actor="((?:[^"\\]|\\.)*)"\] \xef\xbb\xbf(.*)$', re.S)


@pytest.fixture
def webhook(settings):
    """A real HTTP receiver declared as the audit sink."""
    with receiver_running() as srv:
        settings.AGENTOPS_AUDIT_SINK = srv.url
        settings.AGENTOPS_AUDIT_SINK_SECRET = SECRET
        yield srv


def _rows(n: int, actor=None) -> list[Intervention]:
    return [audit_record(actor=actor, action="settings.test", reason=f"row {i}", data={"n": i})
            for i in range(n)]


def test_every_row_goes_to_the_webhook_in_order_signed_and_keyed_by_its_id(webhook, engine,
                                                                          users):
    blocked = blocked_run()
    ACTIONS["retry"].execute(users["operator"], blocked, "try again")  # an operator action
    rows = list(Intervention.objects.order_by("id"))
    assert not webhook.requests  # owed, not sent: the workers send
    assert audit_sink_send() == len(rows)
    bodies = [r["json"] for r in webhook.requests]
    assert [b["id"] for b in bodies] == [r.pk for r in rows]
    assert [b["cursor"] for b in bodies] == sorted(b["cursor"] for b in bodies)
    retry = next(b for b in bodies if b["action"] == "run.retry")
    assert (retry["actor"], retry["reason"], retry["run_id"], retry["team"]) == (
        "operator", "try again", str(blocked.pk), "default")
    for req, row in zip(webhook.requests, rows, strict=True):
        assert req["headers"]["Idempotency-Key"] == f"audit-{row.pk}"
        stamp = req["headers"]["X-AgentOps-Timestamp"]
        mac = hmac.new(SECRET.encode(), stamp.encode() + b"." + req["raw"], hashlib.sha256)
        assert req["headers"]["X-AgentOps-Signature"] == f"sha256={mac.hexdigest()}"
    assert audit_sink_send() == 0  # nothing twice
    _rows(1)
    assert audit_sink_send() == 1 and len(webhook.requests) == len(rows) + 1


def test_a_failing_sink_keeps_the_rows_owed_and_retries_after_a_growing_delay(webhook,
                                                                               settings):
    settings.AGENTOPS_NOTIFY_BACKOFF_S = 5
    rows = _rows(3)
    webhook.statuses = [503, 500]
    before = clock.now()
    assert audit_sink_send() == 0
    cursor = AuditSinkCursor.objects.get()
    assert (cursor.last_seq, cursor.failures) == (0, 1) and "HTTP 503" in cursor.last_error
    # Doubling from AGENTOPS_NOTIFY_BACKOFF_S, jittered by ±50 %.
    assert 2.5 <= (cursor.next_at - before).total_seconds() <= 7.6
    assert audit_sink_send() == 0 and len(webhook.requests) == 1  # not due yet
    later = cursor.next_at + dt.timedelta(seconds=1)
    with clock_reads(lambda: later):
        assert audit_sink_send() == 0
    second = AuditSinkCursor.objects.get()
    assert second.failures == 2 and 5 <= (second.next_at - later).total_seconds() <= 15.1
    with clock_reads(lambda: second.next_at + dt.timedelta(seconds=1)):
        assert audit_sink_send() == 3
    assert [r["headers"]["Idempotency-Key"] for r in webhook.requests] == [
        f"audit-{rows[0].pk}", f"audit-{rows[0].pk}", *[f"audit-{r.pk}" for r in rows]]
    assert sorted(webhook.effective) == sorted(f"audit-{r.pk}" for r in rows)
    done = AuditSinkCursor.objects.get()
    rows[-1].refresh_from_db()
    assert (done.failures, done.last_error, done.last_seq) == (0, "", rows[-1].seq)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_stuck_worker_is_taken_over_and_the_repeat_carries_the_same_key(webhook, settings):
    """A worker that stops mid-send (killed, frozen) loses its claim; the next sends on."""
    settings.AGENTOPS_NOTIFY_CLAIM_S = 0.5
    rows = _rows(3)
    webhook.hold_reply = hold = threading.Event()

    def send_then_close() -> None:
        try:
            audit_sink_send()
        finally:
            connection.close()

    stuck = threading.Thread(target=send_then_close)
    stuck.start()
    assert webhook.arrived.wait(5)
    webhook.hold_reply = None  # only the stuck worker's request hangs
    assert audit_sink_send() == 0  # its claim has not lapsed yet
    time.sleep(0.6)
    assert audit_sink_send() == 3
    hold.set()
    stuck.join(5)
    keys = [r["headers"]["Idempotency-Key"] for r in webhook.requests]
    assert keys.count(f"audit-{rows[0].pk}") == 2  # sent again, same key: the receiver drops it
    assert sorted(webhook.effective) == sorted(f"audit-{r.pk}" for r in rows)
    rows[-1].refresh_from_db()
    assert AuditSinkCursor.objects.get().last_seq == rows[-1].seq


@pytest.mark.parametrize("proto", ["udp", "tcp"])
def test_rows_reach_a_syslog_listener_as_rfc5424(settings, proto, users):
    with syslog_running(proto) as listener:
        settings.AGENTOPS_AUDIT_SINK = listener.url
        rows = _rows(2, actor=users["admin"])
        rows.append(audit_record(actor=None, action="settings.quote",
                                 reason='say "hi"] \\ there'))
        assert audit_sink_send() == 3
        deadline = time.monotonic() + 5
        while len(listener.messages) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
    parsed = [SYSLOG.match(m) for m in listener.messages]
    assert all(parsed), listener.messages
    assert [int(p.group(5)) for p in parsed] == [r.pk for r in rows]
    assert {int(p.group(1)) for p in parsed} == {13 * 8 + 5}  # log audit, notice
    body = json.loads(parsed[0].group(9))
    assert (body["id"], body["actor"], body["data"]) == (rows[0].pk, "admin", {"n": 0})
    assert json.loads(parsed[2].group(9))["reason"] == 'say "hi"] \\ there'


def test_a_bad_sink_address_is_refused_saying_why():
    with pytest.raises(SinkDeclarationError, match="at least 16"):
        sink_from_setting("https://siem.example/hook", "short")
    with pytest.raises(SinkDeclarationError, match="scheme"):
        sink_from_setting("ftp://siem.example/")
    with pytest.raises(SinkDeclarationError, match="host and a port"):
        sink_from_setting("syslog+tcp://siem.example")
    assert sink_from_setting("") is None
    assert sink_from_setting("syslog://127.0.0.1:5514").kind == "syslog-udp"


def test_the_audit_page_shows_admins_how_far_the_stream_got_and_why_it_fails(webhook, users,
                                                                            client):
    _rows(2)
    webhook.statuses = [502]
    audit_sink_send()
    client.force_login(users["admin"])
    line = client.get("/audit/").content.decode().split("data-audit-sink>")[1].split("</p>")[0]
    assert "2 rows still to send" in line and "failing" in line and "HTTP 502" in line
    client.force_login(users["operator"])
    assert "data-audit-sink" not in client.get("/audit/").content.decode()
