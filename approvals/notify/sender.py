"""The sender: workers claim due deliveries, send them outside any transaction, record after.

At least once: a worker that dies after the wire send and before recording leaves its
attempt open; once its claim expires the next sender marks it ``lost`` and sends again with
the same key (webhook header, email Message-ID), so the receiver can drop the repeat. A
worker that dies before sending loses nothing: the row is still owed.
"""
from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections, transaction
from django.db.models import Q

from agentops import clock
from approvals.errors import DeliveryFailed
from approvals.models import Delivery, DeliveryAttempt
from approvals.notify.messages import message_for
from approvals.notify.transports import SENDERS
from approvals.statuses import AttemptStatus, DeliveryStatus

log = logging.getLogger("agentops.notify")


@dataclass
class Sent:
    """How one attempt ended."""

    ok: bool
    response: str = ""
    error: str = ""
    retryable: bool = True


def deliveries_send(*, limit: int = 20) -> list[int]:
    """Claim up to ``limit`` due deliveries, send each and record its attempt; return their ids."""
    worker = f"{socket.gethostname()}:{os.getpid()}"
    done = []
    for d in deliveries_claim(limit=limit, worker=worker):
        result = _send(d)
        _record(d, result)
        done.append(d.pk)
    return done


def deliveries_claim(*, limit: int, worker: str) -> list[Delivery]:
    """Claim due deliveries in one short transaction and open an attempt for each.

    Due: pending with ``next_at`` passed, or sending whose claim expired (its worker died;
    that attempt is marked lost). A delivery out of attempts fails instead.
    """
    now = clock.now()
    claimed = []
    with transaction.atomic():
        # skip_locked: rows another sender is claiming right now are its; take the next free
        # ones instead of waiting (nowait would make concurrent senders fail each other).
        rows = list(Delivery.objects.select_for_update(skip_locked=True)
                    .filter(Q(status=DeliveryStatus.PENDING, next_at__lte=now)
                            | Q(status=DeliveryStatus.SENDING, claimed_until__lt=now))
                    .order_by("next_at", "id")[:limit])
        for d in rows:
            if _claim_one(d, now, worker):
                claimed.append(d)
    return claimed


def _claim_one(d: Delivery, now: dt.datetime, worker: str) -> bool:
    if d.status == DeliveryStatus.SENDING:
        DeliveryAttempt.objects.filter(delivery=d, n=d.attempts, status=AttemptStatus.SENDING
                                       ).update(status=AttemptStatus.LOST, finished_at=now,
                                                error="the worker sending it stopped before "
                                                      "recording the result")
    guard = Delivery.objects.filter(pk=d.pk, status=d.status, attempts=d.attempts)
    if d.attempts >= settings.AGENTOPS_NOTIFY_MAX_ATTEMPTS:
        guard.update(status=DeliveryStatus.FAILED, claimed_until=None,
                     last_error=f"gave up after {d.attempts} attempts; last: {d.last_error}"[:2000])
        return False
    until = now + dt.timedelta(seconds=settings.AGENTOPS_NOTIFY_CLAIM_S)
    # The conditional UPDATE is the claim on SQLite too, where select_for_update locks nothing.
    if not guard.update(status=DeliveryStatus.SENDING, attempts=d.attempts + 1,
                        claimed_until=until):
        return False
    d.status, d.attempts, d.claimed_until = DeliveryStatus.SENDING, d.attempts + 1, until
    DeliveryAttempt.objects.create(delivery=d, n=d.attempts, worker=worker, started_at=now)
    return True


def _send(d: Delivery) -> Sent:
    decl = settings.AGENTOPS_NOTIFY_CHANNELS.get(d.channel)
    if decl is None:
        declared = ", ".join(sorted(settings.AGENTOPS_NOTIFY_CHANNELS)) or "none"
        return Sent(False, error=f"channel {d.channel!r} is not declared in "
                                 f"AGENTOPS_NOTIFY_CHANNELS (declared: {declared})",
                    retryable=False)
    full = Delivery.objects.select_related("track", "run", "approval", "user").get(pk=d.pk)
    try:
        return Sent(True, response=SENDERS[decl["kind"]](full, message_for(full), decl)[:300])
    except DeliveryFailed as exc:
        return Sent(False, error=str(exc), retryable=exc.retryable)
    except Exception as exc:  # noqa: BLE001 - one bad message must not stop the others
        log.exception("delivery %s could not be built or sent", d.key[:12])
        return Sent(False, error=f"internal error: {type(exc).__name__}: {exc}"[:2000])


def _record(d: Delivery, result: Sent) -> None:
    """Close the attempt and move the delivery: sent, due again after a backoff, or failed."""
    now = clock.now()
    status = AttemptStatus.OK if result.ok else AttemptStatus.ERROR
    with transaction.atomic():
        DeliveryAttempt.objects.filter(delivery=d, n=d.attempts).update(
            status=status, finished_at=now, response=result.response, error=result.error)
        # Only while the claim is still ours: a later sender may have taken it over.
        mine = Delivery.objects.filter(pk=d.pk, status=DeliveryStatus.SENDING,
                                       attempts=d.attempts)
        if result.ok:
            mine.update(status=DeliveryStatus.SENT, sent_at=now, claimed_until=None,
                        last_error="")
        elif result.retryable and d.attempts < settings.AGENTOPS_NOTIFY_MAX_ATTEMPTS:
            mine.update(status=DeliveryStatus.PENDING, claimed_until=None,
                        next_at=now + dt.timedelta(seconds=retry_delay(d.attempts)),
                        last_error=result.error[:2000])
        else:
            mine.update(status=DeliveryStatus.FAILED, claimed_until=None,
                        last_error=result.error[:2000])
    if not result.ok:
        log.warning("delivery %s to %s on %s failed (attempt %d): %s", d.key[:12],
                    d.recipient, d.channel, d.attempts, result.error)


def retry_delay(attempt: int) -> float:
    """Return the backoff after failed attempt ``attempt`` (doubling, jittered, capped at 1h)."""
    base = settings.AGENTOPS_NOTIFY_BACKOFF_S * 2 ** (attempt - 1)
    return min(3600.0, base * (0.5 + clock.rng().random()))


def sender_loop(stop: threading.Event, *, interval_s: float) -> None:
    """Send due deliveries every ``interval_s`` until ``stop`` is set (a worker's thread)."""
    drain_loop(stop, interval_s=interval_s, send=deliveries_send, what="sending notifications")


def drain_loop(stop: threading.Event, *, interval_s: float, send: Callable[[], Any],
               what: str) -> None:
    """Call ``send`` until it has nothing left, then wait ``interval_s``; until ``stop``.

    A worker thread's loop: a failed round is logged (``what`` names it) and tried again.
    """
    while not stop.is_set():
        close_old_connections()
        try:
            while send() and not stop.is_set():
                pass
        except DatabaseError:
            log.exception("%s failed; retrying in %.1fs", what, interval_s)
        except Exception:  # noqa: BLE001 - the thread must outlive any one bad round
            log.exception("%s failed unexpectedly; retrying in %.1fs", what, interval_s)
        stop.wait(interval_s)
