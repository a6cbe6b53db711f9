"""The recoverer: each worker host's watch for runs whose worker is gone, sooner than a sweep.

A worker host runs it on a thread of its own beside the sweeper (runs.cli.worker), and the
sweeper then leaves recovery to it. It notices the two ways a run loses its worker as they
happen, and costs next to nothing while nothing does:

- **a dead owner** (SIGKILL, a crash, OOM): its PostgreSQL sessions close at once. Every
  ``AGENTOPS_RECOVERY_CHECK_S`` the recoverer reads the names of the server's sessions (no
  table, no commit); when a session named like a worker (``host:pid``) has vanished since
  the last look, it recovers that owner's runs (runs.engine.runtime.recovery,
  ``runs_recover_dead_owners``) there and then. The full check also runs every
  ``AGENTOPS_SWEEP_INTERVAL_S``, so a name gone between two looks is never missed.
- **an expired lease** (a paused or frozen worker keeps its sessions): the recoverer knows
  when the first lease expires (one read of the running runs) and sleeps until that
  moment, not a fixed interval, then recovers what expired; a paused owner still locking
  the run's row inside a transaction is ended first (``holders_end``). The next expiry is
  read again at least every sweep interval (a host with a shorter TTL may claim meanwhile).

Off PostgreSQL, or behind a transaction pooler without a direct URL (runs.pooler), no
session tells an owner is alive: only expiries are watched.
"""
from __future__ import annotations

import datetime as dt
import logging
import threading
from dataclasses import dataclass, field

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection

from agentops import clock
from runs.engine.runtime.recovery import (lease_next_expiry, runs_recover_dead_owners,
                                          runs_recover_expired)
from runs.pooler import owners_judged

log = logging.getLogger("agentops.recoverer")
_SLOW_S = 0.5  # a round slower than this is logged: recovery waits for it
# Only worker-named sessions (``host:pid``), filtered by the server.
_NAMES_SQL = ("SELECT DISTINCT application_name FROM pg_stat_activity "
              "WHERE application_name ~ ':[0-9]+$'")


@dataclass
class Watch:
    """What the recoverer saw last: worker session names, and when it next has work."""

    names: set[str] = field(default_factory=set)
    # After a database outage, only owners seen on the server since then are judged by name
    # (None: every owner); the others are left to their leases (``_after_outage``).
    seen: set[str] | None = None
    owners_due: float = 0.0  # monotonic: the next full check of dead owners
    expiry_due: float = 0.0  # monotonic: the first lease expiry (or the next look at it)


def recover_round(watch: Watch) -> float:
    """Recover what lost its worker since the last round; return seconds until the next.

    A round that finds nothing reads the session names (PostgreSQL) and nothing else.
    """
    now = clock.monotonic()
    interval = settings.AGENTOPS_SWEEP_INTERVAL_S
    judged = connection.vendor == "postgresql" and owners_judged()
    if judged and (_owners_vanished(watch) or now >= watch.owners_due):
        dead = runs_recover_dead_owners(only=watch.seen)
        if dead:
            log.info("recovered %d runs of dead workers", len(dead))
        watch.owners_due = now + interval
    if now >= watch.expiry_due:
        watch.expiry_due = now + _expiry_look(interval)
    wait = watch.expiry_due - now
    if judged:
        wait = min(wait, settings.AGENTOPS_RECOVERY_CHECK_S)
    return max(0.0, wait)


def _owners_vanished(watch: Watch) -> bool:
    """Return True when a worker-named session seen last time is gone (one catalog read)."""
    with connection.cursor() as cur:
        cur.execute(_NAMES_SQL)
        names = {name for (name,) in cur.fetchall()}
    gone = bool(watch.names - names)
    watch.names = names
    if watch.seen is not None:
        watch.seen |= names
    return gone


def _expiry_look(cap_s: float) -> float:
    """Recover the runs whose lease expired, if any; return seconds until the next look.

    One read tells the next expiry and whether one has passed: the recovery's own query
    runs only then (then the next expiry is read again), not at every look.

    The second read counts from the recovery's own cutoff, not from the end of the round: a
    lease that expired while the round recovered (dozens of a paused host's runs, a holder
    ended) was not tried yet, so the next look is at once, not a check later as for a run
    tried and found locked (by the recoverer of another host, or a holder not yet ended).
    """
    first, overdue = lease_next_expiry(now=clock.now())
    if not overdue:
        return _until(first, overdue, cap_s)
    cutoff = clock.now()
    expired = runs_recover_expired(now=cutoff)
    if expired:
        log.info("recovered %d runs whose lease expired", len(expired))
    first, overdue = lease_next_expiry(now=cutoff)
    return _until(first, overdue, cap_s)


def _until(first: dt.datetime | None, overdue: bool, cap_s: float) -> float:
    """Return seconds until ``first`` (a little after it; none if it has passed), at most
    ``cap_s``.

    A lease expired but not recovered (its row locked by a holder not yet idle long enough
    to be ended) is tried again after ``AGENTOPS_RECOVERY_CHECK_S``, never in a busy loop.
    """
    now = clock.now()
    if overdue:
        cap_s = min(cap_s, settings.AGENTOPS_RECOVERY_CHECK_S)
    if first is None:
        return cap_s
    # Just past it: the sweep's test is strict (expires_at < now).
    return min(cap_s, (first - now).total_seconds() + 0.01)


def _after_outage(watch: Watch, now: float) -> None:
    """Judge by name only the owners seen since the database failed under this recoverer.

    Every session died with it (or with the primary a standby replaced): a live worker's
    sessions are absent until it next needs one (a q2 process whose runs all wait on their
    model opens none), and would read as a dead owner's while its keeper renews its leases.
    So an owner is judged dead by its vanished name only once it has been seen on this
    server; one never seen again (it died in the outage) loses its runs when their leases
    expire, as a paused worker's do, and so do the runs whose ticks failed.
    """
    watch.names = set()
    watch.seen = set()
    watch.owners_due = now + settings.AGENTOPS_LEASE_TTL_S


def recover_loop(stop: threading.Event) -> None:
    """Recover runs of lost workers until ``stop`` is set.

    A database that went away (a restart, a failover) is asked again every
    ``AGENTOPS_RECOVERY_CHECK_S`` on a new connection, not every sweep interval: after a
    promotion the runs whose leases lapsed meanwhile are recovered as soon as it answers
    (``_after_outage`` for the owners still connecting).
    """
    watch = Watch()
    tidied, down = -1.0, None
    while not stop.is_set():
        began = clock.monotonic()
        if began - tidied >= settings.AGENTOPS_SWEEP_INTERVAL_S:
            close_old_connections()  # not every round: its health check is a query too
            tidied = began
        try:
            wait = recover_round(watch)
            took = clock.monotonic() - began
            if took > _SLOW_S:
                log.warning("recovery round took %.2fs", took)
            if down is not None:
                log.warning("recovery rounds work again after %.1fs", began - down)
                down = None
        except DatabaseError:
            if down is None:  # the traceback once an outage, not once a retry
                log.exception("recovery round failed; retrying every %gs",
                              settings.AGENTOPS_RECOVERY_CHECK_S)
                down = began
            connection.close()
            _after_outage(watch, began)
            wait = settings.AGENTOPS_RECOVERY_CHECK_S
        except Exception:  # noqa: BLE001 - recovery must outlive any one bad round
            log.exception("recovery round failed unexpectedly; retrying")
            wait = settings.AGENTOPS_SWEEP_INTERVAL_S
        stop.wait(wait)
