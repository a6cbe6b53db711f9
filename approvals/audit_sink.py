"""The audit stream: workers send every audit row, oldest first, to AGENTOPS_AUDIT_SINK.

The audit table is the outbox (approvals.audit_models.AuditSinkCursor says why): a row is
owed to the sink once its transaction commits. A worker claims the sink's cursor, sends the
rows after it in order, and moves it past each row the sink took. A failure keeps the row
owed and retries after a growing delay, forever: nothing is skipped. A worker that dies
between the send and the move leaves the row owed; once its claim lapses the next worker
sends it again with the same idempotency key (the row id), so the receiver drops the repeat.
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import Q

from agentops import clock
from approvals.audit import audit_sequence
from approvals.audit_declared import Sink, sink_from_setting
from approvals.audit_export import audit_row
from approvals.errors import DeliveryFailed
from approvals.models import AuditSinkCursor, Intervention
from approvals.notify.sender import drain_loop, retry_delay
from approvals.notify.transports import (
    KEY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, http_post, signature)

log = logging.getLogger("agentops.audit")

# RFC 5424: facility 13 (log audit) × 8 + severity 5 (notice); 32473 is the enterprise
# number RFC 5612 reserves for examples, used for our structured-data element.
_PRI = 13 * 8 + 5
_SD_ID = "agentops@32473"
# Past this a UDP datagram may not arrive whole; the row's data is left out (the export
# has it by cursor) rather than the row lost.
_UDP_MAX = 8192


def configured_sink() -> Sink | None:
    """Return the sink AGENTOPS_AUDIT_SINK declares, or None."""
    return sink_from_setting(settings.AGENTOPS_AUDIT_SINK, settings.AGENTOPS_AUDIT_SINK_SECRET)


def audit_sink_status() -> dict[str, object] | None:
    """Return how far the configured sink has got, for the console; None when there is none."""
    sink = configured_sink()
    if sink is None:
        return None
    cursor = AuditSinkCursor.objects.filter(sink=sink.address).first()
    parts = urlsplit(sink.address)
    owed = Intervention.objects.filter(
        Q(seq__isnull=True) | Q(seq__gt=cursor.last_seq if cursor else 0)).count()
    return {"where": f"{parts.scheme}://{parts.hostname}:{parts.port or ''}{parts.path}",
            "cursor": cursor, "owed": owed}


def audit_sink_send(*, limit: int = 200) -> int:
    """Send the audit rows the sink has not taken yet, oldest first; return how many it took."""
    sink = configured_sink()
    if sink is None:
        return 0
    audit_sequence()
    worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    cursor = _claim(sink, worker)
    if cursor is None:
        return 0
    rows = list(Intervention.objects.select_related("team").filter(seq__gt=cursor.last_seq)
                .order_by("seq")[:limit])
    sent = 0
    try:
        with _transport(sink) as send:
            for row in rows:
                send(row)
                if not _advance(sink, worker, row.seq):
                    return sent  # another worker took the cursor over: it goes on
                sent += 1
    except DeliveryFailed as exc:
        _fail(sink, worker, str(exc))
        return sent
    _release(sink, worker)
    return sent


def _claim(sink: Sink, worker: str) -> AuditSinkCursor | None:
    """Claim the sink's cursor when it is free and due; None when another worker holds it."""
    now = clock.now()
    AuditSinkCursor.objects.bulk_create([AuditSinkCursor(sink=sink.address)],
                                        ignore_conflicts=True)
    free = Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
    due = Q(next_at__isnull=True) | Q(next_at__lte=now)
    # The conditional UPDATE is the claim: one worker sends per sink, so rows go in order.
    until = now + dt.timedelta(seconds=settings.AGENTOPS_NOTIFY_CLAIM_S)
    if not AuditSinkCursor.objects.filter(free & due, sink=sink.address).update(
            claimed_until=until, claimed_by=worker):
        return None
    return AuditSinkCursor.objects.get(sink=sink.address)


def _advance(sink: Sink, worker: str, seq: int) -> bool:
    """Move the cursor past ``seq`` and renew the claim, while the claim is still ours."""
    now = clock.now()
    return bool(AuditSinkCursor.objects.filter(sink=sink.address, claimed_by=worker).update(
        last_seq=seq, failures=0, last_error="", last_sent_at=now,
        claimed_until=now + dt.timedelta(seconds=settings.AGENTOPS_NOTIFY_CLAIM_S)))


def _fail(sink: Sink, worker: str, error: str) -> None:
    """Keep the row owed and make the cursor due again after a growing delay."""
    mine = AuditSinkCursor.objects.filter(sink=sink.address, claimed_by=worker)
    failures = (mine.values_list("failures", flat=True).first() or 0) + 1
    mine.update(failures=failures, last_error=error[:2000], claimed_until=None, claimed_by="",
                next_at=clock.now() + dt.timedelta(seconds=retry_delay(min(failures, 12))))
    log.warning("audit sink %s refused or unreachable (try %d): %s", sink.address, failures,
                error)


def _release(sink: Sink, worker: str) -> None:
    AuditSinkCursor.objects.filter(sink=sink.address, claimed_by=worker).update(
        claimed_until=None, claimed_by="")


@contextmanager
def _transport(sink: Sink) -> Iterator[Callable[[Intervention], None]]:
    """Yield a function sending one row to ``sink``; a socket lives for one round."""
    if sink.kind == "webhook":
        yield lambda row: _webhook_send(sink, row)
        return
    try:
        if sink.kind == "syslog-tcp":
            sock = socket.create_connection((sink.host, sink.port),
                                            timeout=settings.AGENTOPS_NOTIFY_TIMEOUT_S)
        else:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.connect((sink.host, sink.port))
    except OSError as exc:
        raise DeliveryFailed(f"cannot reach {sink.address}: {exc}") from exc
    try:
        yield lambda row: _syslog_send(sock, sink, row)
    finally:
        sock.close()


def _webhook_send(sink: Sink, row: Intervention) -> None:
    """POST one row as JSON, signed like notification webhooks, keyed by the row id."""
    raw = json.dumps(audit_row(row), sort_keys=True, default=str).encode()
    stamp = str(int(time.time()))
    http_post(sink.address, raw, {KEY_HEADER: f"audit-{row.pk}", TIMESTAMP_HEADER: stamp,
                                  SIGNATURE_HEADER: signature(sink.secret, stamp, raw)})


def _syslog_send(sock: socket.socket, sink: Sink, row: Intervention) -> None:
    """Send one row as an RFC 5424 message (TCP: octet-counted, RFC 6587)."""
    message = syslog_message(row, udp=sink.kind == "syslog-udp")
    try:
        if sink.kind == "syslog-tcp":
            sock.sendall(str(len(message)).encode() + b" " + message)
        else:
            sock.send(message)
    except OSError as exc:
        raise DeliveryFailed(f"sending to {sink.address} failed: {exc}") from exc


def syslog_message(row: Intervention, *, udp: bool = False) -> bytes:
    """Return the RFC 5424 message of one audit row: structured data, then the row as JSON."""
    body = audit_row(row)
    head = (f"<{_PRI}>1 {body['at']} {socket.gethostname()[:255] or '-'} agentops "
            f"{os.getpid()} audit [{_SD_ID} id=\"{row.pk}\" cursor=\"{row.seq}\" "
            f"action=\"{_sd_escape(row.action)}\" actor=\"{_sd_escape(row.actor_name)}\"] ")
    message = (head + "\ufeff" + json.dumps(body, sort_keys=True, default=str)).encode()
    if udp and len(message) > _UDP_MAX:
        body["data"] = {"left_out": f"{len(message)} bytes; GET /api/audit/export?after="
                                    f"{row.seq - 1}&limit=1 has it"}
        message = (head + "\ufeff" + json.dumps(body, sort_keys=True, default=str)).encode()
    return message


def _sd_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("]", "\\]")


def audit_sink_loop(stop: threading.Event, *, interval_s: float) -> None:
    """Stream audit rows every ``interval_s`` until ``stop`` is set (a worker's thread)."""
    drain_loop(stop, interval_s=interval_s, send=audit_sink_send, what="streaming audit rows")
