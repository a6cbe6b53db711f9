"""Chaos for the audit stream: SIGKILL the worker sending audit rows after the wire send.

The rows are committed here; real worker processes (``agentops worker``) stream them to a
real HTTP receiver. The first worker is killed while the receiver holds its answer: the row
arrived but the worker never moved the sink's cursor. The next worker sends that row again
with the same key and then the rest: nothing lost, the receiver keeps each row once.
"""
from __future__ import annotations

import threading

import pytest

from approvals.audit import audit_record
from approvals.models import AuditSinkCursor, Intervention
from tests.e2e.workers import Worker, wait_until
from tests.notify_servers import receiver_running

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SECRET = "chaos-secret-for-the-audit-sink"


def _worker(tmp_path, name: str, url: str) -> Worker:
    return Worker(name, tmp_path, AGENTOPS_AUDIT_SINK=url, AGENTOPS_AUDIT_SINK_SECRET=SECRET,
                  AGENTOPS_NOTIFY_TIMEOUT_S="5", AGENTOPS_NOTIFY_CLAIM_S="6",
                  AGENTOPS_NOTIFY_BACKOFF_S="0.5")


def test_a_worker_killed_mid_stream_loses_no_row_and_the_repeat_has_the_same_key(tmp_path):
    rows = [audit_record(actor=None, action="settings.chaos", data={"n": n}) for n in range(5)]
    with receiver_running() as recv:
        recv.hold_reply = threading.Event()
        first = _worker(tmp_path, "a", recv.url)
        first.start()
        try:
            assert recv.arrived.wait(60), "the worker never sent a row"
            first.kill()
        finally:
            first.stop()
        recv.hold_reply.set()
        recv.hold_reply = None
        assert AuditSinkCursor.objects.get().last_seq == 0
        second = _worker(tmp_path, "b", recv.url)
        second.start()
        try:
            last = Intervention.objects.get(pk=rows[-1].pk).seq
            wait_until(lambda: AuditSinkCursor.objects.filter(last_seq=last).exists(), 60,
                       "the second worker to stream every row")
        finally:
            second.stop()
    keys = [r["headers"]["Idempotency-Key"] for r in recv.requests]
    assert keys == [f"audit-{rows[0].pk}", *[f"audit-{r.pk}" for r in rows]]
    assert sorted(recv.effective) == sorted(f"audit-{r.pk}" for r in rows)
    assert [r["json"]["data"]["n"] for r in recv.requests[1:]] == [0, 1, 2, 3, 4]
