"""The sweeper: what wakes runs when no worker holds them. Safe on every worker host at once.

One sweep re-queues runs whose lease expired or whose worker died (unless the host's
recoverer thread does that sooner, runs.recoverer), wakes due timers, applies
approval expiry policies, wakes runs whose signal or children arrived, times out waits past
their deadline, blocks or terminates runs holding no worker past the run's own deadline
(runs.services_operator.deadline), closes the calls stopped runs left running (stragglers),
moves notification SLA clocks that ran out (reminders, escalations), makes the event table's
monthly partitions ahead (runs.partitions, once an hour), and stamps this
process's heartbeat row. Every piece locks the run row it
changes (``skip_locked``) and re-checks it, so two sweepers never move a run twice.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections

from agentops import clock
from approvals.notify.escalation import tracks_escalate
from approvals.services import approvals_expire_due
from runs.engine.runtime.recovery import (
    runs_recover_dead_owners,
    runs_recover_expired,
    runs_requeue_stale,
)
from runs.engine.runtime.stragglers import stragglers_sweep
from runs.engine.runtime.waits import children_wake, signals_wake, timers_wake, waits_time_out
from runs.models import WorkerHeartbeat
from runs.partitions import partitions_ensure_due
from runs.services_operator.deadline import deadlines_enforce
from runs.sweep_due import sweep_due

log = logging.getLogger("agentops.sweeper")


@dataclass
class SweepReport:
    """What one sweep did, by kind (run or approval ids)."""

    dead: list[Any] = field(default_factory=list)
    recovered: list[Any] = field(default_factory=list)
    requeued: list[Any] = field(default_factory=list)
    deadlines: list[Any] = field(default_factory=list)
    timers: list[Any] = field(default_factory=list)
    approvals: list[Any] = field(default_factory=list)
    signals: list[Any] = field(default_factory=list)
    children: list[Any] = field(default_factory=list)
    timeouts: list[Any] = field(default_factory=list)
    stragglers: list[Any] = field(default_factory=list)
    escalations: list[Any] = field(default_factory=list)
    partitions: list[Any] = field(default_factory=list)

    def total(self) -> int:
        """Return how many things the sweep moved."""
        return sum(len(v) for v in self.__dict__.values())

    def line(self) -> str:
        """Return a one-line summary for logs and the CLI."""
        return " ".join(f"{k}={len(v)}" for k, v in self.__dict__.items())


_RECOVERY = (("dead", runs_recover_dead_owners), ("recovered", runs_recover_expired))
_PARTS = (("requeued", runs_requeue_stale), ("deadlines", deadlines_enforce),
          ("timers", timers_wake), ("approvals", approvals_expire_due),
          ("signals", signals_wake), ("children", children_wake), ("timeouts", waits_time_out),
          ("stragglers", stragglers_sweep), ("escalations", tracks_escalate),
          ("partitions", partitions_ensure_due))


def sweep_once(*, name: str | None = None, recover: bool = True) -> SweepReport:
    """Run one sweep and return what it did.

    Each part runs on its own: one that fails (bad data in one run, a lost connection) is
    logged and the others still run, so recovery of dead workers' runs never stops.
    ``recover=False``: leave the runs of lost workers to the host's recoverer thread
    (runs.recoverer), which notices them sooner.
    """
    done: dict[str, list[Any]] = {part: [] for part, _ in _RECOVERY + _PARTS}
    due = _due()
    for part, fn in (_RECOVERY + _PARTS) if recover else _PARTS:
        if not due.get(part, True):
            continue  # its own query would find nothing (runs.sweep_due)
        try:
            done[part] = fn()
        except Exception:  # noqa: BLE001 - isolate the parts; logged with the trace
            log.exception("sweep part %s failed; the other parts ran", part)
            done[part] = []
    heartbeat_stamp(name=name or sweeper_name())
    return SweepReport(**done)


def _due() -> dict[str, bool]:
    """Return which parts may have work; every part when that cannot be told."""
    try:
        return sweep_due()
    except DatabaseError:
        log.exception("the sweep's look for due work failed; every part runs")
        return {}


def sweep_loop(stop: threading.Event, *, interval_s: float | None = None,
               name: str | None = None, recover: bool = True) -> None:
    """Sweep every ``interval_s`` until ``stop`` is set; a database hiccup waits a round."""
    interval = interval_s if interval_s is not None else settings.AGENTOPS_SWEEP_INTERVAL_S
    name = name or sweeper_name()
    while not stop.is_set():
        close_old_connections()
        try:
            report = sweep_once(name=name, recover=recover)
            if report.total():
                log.info("sweep %s", report.line())
        except DatabaseError:
            # The database went away (restart, failover): keep the loop alive and try again.
            log.exception("sweep failed; retrying in %.1fs", interval)
        except Exception:  # noqa: BLE001 - the sweeper must outlive any one bad sweep
            log.exception("sweep failed unexpectedly; retrying in %.1fs", interval)
        stop.wait(interval)


def heartbeat_stamp(*, name: str) -> None:
    """Record that the process called ``name`` is alive now."""
    # One UPDATE a sweep; only the first sweep of a process inserts (the name holds its pid).
    fields = {"host": socket.gethostname(), "pid": os.getpid(), "seen_at": clock.now()}
    if not WorkerHeartbeat.objects.filter(name=name).update(**fields):
        WorkerHeartbeat.objects.update_or_create(name=name, defaults=fields)


def sweeper_name() -> str:
    """Return this process's heartbeat name."""
    return f"sweeper@{socket.gethostname()}:{os.getpid()}"
