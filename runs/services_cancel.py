"""What cancelling a run closes besides its status: approvals, ledger calls, open attempts."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentops import clock
from approvals.statuses import ApprovalStatus
from approvals.transition import approvals_close_pending
from ledger.models import ToolCall
from ledger.services.record import toolcall_update
from ledger.statuses import ToolCallStatus as TC
from runs.engine.runtime.stragglers import stragglers_close
from runs.models import Run

# Calls that have not run and now never will.
_NEVER_RUN = (TC.PENDING, TC.AWAITING_APPROVAL, TC.FAILED, TC.TIMED_OUT,
              TC.CONFIRMED_NOT_EXECUTED)


def run_cancel_writes(run: Run, reason: str) -> list[Callable[[], Any]]:
    """Return the writers that close what a cancelled run leaves open (run in its commit)."""
    return [lambda: _approvals_stale(run, reason), lambda: _calls_close(run)]


def _approvals_stale(run: Run, reason: str) -> None:
    approvals_close_pending(run=run, to=ApprovalStatus.STALE,
                            reason=f"the run was cancelled: {reason}" if reason
                            else "the run was cancelled")


def _calls_close(run: Run) -> None:
    now = clock.now()
    for call in ToolCall.objects.filter(run=run, status__in=_NEVER_RUN):
        toolcall_update(call, TC.CANCELLED, finished_at=now, not_before=None)()
    # A call in flight: a read is abandoned, a write may have happened (unknown). If its
    # worker is alive, its late result (runs.engine.runtime.parking) overwrites this with
    # what really happened.
    stragglers_close(run, why="the run was cancelled while this call was in flight",
                     ended=True, cause="cancelled_in_flight")
