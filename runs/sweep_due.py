"""Which parts of a sweep have anything to do: one statement instead of a query per part.

A sweep (runs.sweeper) runs a dozen parts every second on every worker host; each asks its
own table for due work with an ORM query, ~1 ms of host CPU apiece, and almost every one
finds nothing. ``sweep_due`` asks all of them at once, one ``EXISTS`` per part with the
same condition the part selects its work by (or a wider one), so a part is skipped only
when its own query would have found nothing. Change a part's selection and its line here
together (tests/runs/test_sweep_due.py puts due work of every kind in front of it).
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db import connection

from agentops import clock
from approvals.models import Approval
from approvals.notify.models import NotifyTrack
from approvals.statuses import ApprovalStatus
from ledger.models import ToolCall
from ledger.statuses import ToolCallStatus
from runs.engine.runtime.recovery import STALE_QUEUED_S
from runs.engine.runtime.stragglers import STOPPED
from runs.models import Run, Signal
from runs.services_operator.deadline import NO_WORKER
from runs.statuses import RunStatus, WaitKind

# Each part's EXISTS, named as in runs.sweeper; {run} etc. are the tables.
_CHECKS = {
    # runs_requeue_stale
    "requeued": "SELECT 1 FROM {run} WHERE status = %s AND updated_at < %s",
    # deadlines_enforce
    "deadlines": ("SELECT 1 FROM {run} WHERE (status = %s OR on_deadline IN (%s, %s)) "
                  "AND deadline <= %s AND status IN (%s, %s, %s)"),
    # timers_wake
    "timers": "SELECT 1 FROM {run} WHERE status = %s AND wait_kind = %s AND wait_until <= %s",
    # approvals_expire_due
    "approvals": ("SELECT 1 FROM {approval} WHERE status = %s AND escalated = %s "
                  "AND expires_at < %s"),
    # signals_wake
    "signals": ("SELECT 1 FROM {signal} s JOIN {run} r ON r.id = s.run_id WHERE "
                "s.consumed_seq IS NULL AND r.status = %s AND r.wait_kind = %s"),
    # children_wake: every fan-out wait is looked at (its children may have ended)
    "children": "SELECT 1 FROM {run} WHERE status = %s AND wait_kind = %s",
    # waits_time_out
    "timeouts": ("SELECT 1 FROM {run} WHERE status = %s AND wait_kind IN (%s, %s) "
                 "AND wait_until <= %s"),
    # stragglers_sweep
    "stragglers": ("SELECT 1 FROM {call} c JOIN {run} r ON r.id = c.run_id WHERE c.status = %s "
                   f"AND r.status IN ({', '.join(['%s'] * len(STOPPED))})"),
    # tracks_escalate
    "escalations": "SELECT 1 FROM {track} WHERE closed_at IS NULL AND due_at <= %s",
}


def sweep_due() -> dict[str, bool]:
    """Return, for each part named in ``_CHECKS``, whether it may have work now."""
    tables = {"run": Run._meta.db_table, "approval": Approval._meta.db_table,
              "signal": Signal._meta.db_table, "call": ToolCall._meta.db_table,
              "track": NotifyTrack._meta.db_table}
    sql = "SELECT " + ", ".join(f"EXISTS({check.format(**tables)})"
                                for check in _CHECKS.values())
    with connection.cursor() as cur:
        cur.execute(sql, [connection.ops.adapt_datetimefield_value(p)
                          if isinstance(p, dt.datetime) else getattr(p, "value", p)
                          for p in _params(clock.now())])
        row = cur.fetchone()
    return {part: bool(flag) for part, flag in zip(_CHECKS, row, strict=True)}


def _params(now: dt.datetime) -> list[Any]:
    """Return the parameters of ``_CHECKS`` in order."""
    waiting = RunStatus.WAITING
    # deadlines_enforce: on_deadline "terminate", or unset when the policy terminates.
    unset = "" if settings.AGENTOPS_DEADLINE_POLICY == "terminate" else "terminate"
    return [
        RunStatus.QUEUED, now - dt.timedelta(seconds=STALE_QUEUED_S),
        waiting, "terminate", unset, now, *NO_WORKER,
        waiting, WaitKind.TIMER, now,
        ApprovalStatus.PENDING, False, now,
        waiting, WaitKind.SIGNAL,
        waiting, WaitKind.CHILDREN,
        waiting, WaitKind.SIGNAL, WaitKind.CHILDREN, now,
        ToolCallStatus.RUNNING, *STOPPED,
        now,
    ]
