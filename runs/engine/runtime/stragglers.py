"""Stragglers: tool calls and attempts left ``running`` by a run that stopped without its holder.

A run that stops while no worker holds it (blocked by its recovery limit in the sweeper,
cancelled or terminated by an operator) may still list a call in flight: its worker died or
lost its lease mid-call. Nobody will ever finish that call, so the stop closes each open
call and attempt to what is known, in the same transaction that stops the run:

- a read is abandoned: its attempt ends ``timed_out`` (``abandoned``); the call is pending
  again on a blocked run (a retry reads again) and cancelled on an ended one;
- a keyed write (idempotent) on a blocked run is pending again (its key makes a repeat
  safe), like a read; on an ended run it may have happened, so it is ``unknown``;
- any other write (probeable or unsafe) becomes ``unknown`` with its attempt, for a person
  to confirm (``approvals/actions/confirm.py``); a probeable one says so. Its probe is not
  run here: that is outside I/O, and "not found" means "not done" only after the attempt's
  hard deadline (``fencing.py``).

A worker that was only paused may still come back: its commit fails (LeaseLost) and a late
result is recorded over ``unknown`` (``parking.py``).

The invariant this keeps, "no attempt ``running`` without a live lease", is counted by
``selfcheck.attempts_running_unleased`` (``/metrics``:
``agentops_attempts_running_without_lease``); the sweeper closes what any other stop left
(``stragglers_sweep``).
"""
from __future__ import annotations

from typing import Any

from django.db import transaction

from agentops import clock
from ledger.models import ToolAttempt, ToolCall
from ledger.services.record import toolcall_update
from ledger.statuses import ToolCallStatus as TC
from runs.models import Run
from runs.statuses import TERMINAL, RunStatus

ABANDONED = "abandoned"


def stragglers_close(run: Run, *, why: str, ended: bool, cause: str) -> list[str]:
    """Close every call and attempt ``run`` left running; return the calls closed.

    Call it inside the transaction that stops ``run`` (blocked: ``ended=False``; cancelled:
    ``ended=True``) with the run row locked, so no worker commits a result meanwhile.
    ``cause`` is the error class of a write left ``unknown`` (``worker_lost``,
    ``cancelled_in_flight``); ``why`` starts each message.
    """
    now = clock.now()
    closed = []
    for call in ToolCall.objects.filter(run=run, status=TC.RUNNING):
        n = max(call.attempts, _last_attempt(call))
        to, error_class, text = _verdict(call, why, ended, cause)
        fields: dict[str, Any] = {"attempts": n, "error_class": error_class, "error": text}
        if to != TC.UNKNOWN:
            fields["finished_at"] = now
        toolcall_update(call, to, **fields)()
        closed.append(call.tool_call_id)
    # Attempts left open whatever their call says now (also the call's own, just decided).
    for attempt in ToolAttempt.objects.filter(tool_call__run=run, status=TC.RUNNING) \
            .select_related("tool_call"):
        call = attempt.tool_call
        is_unknown = call.status == TC.UNKNOWN
        ToolAttempt.objects.filter(pk=attempt.pk).update(
            status=TC.UNKNOWN if is_unknown else TC.TIMED_OUT, finished_at=now,
            error_class=call.error_class or ABANDONED, error=call.error or why)
    return closed


def _last_attempt(call: ToolCall) -> int:
    return (ToolAttempt.objects.filter(tool_call=call).order_by("-attempt")
            .values_list("attempt", flat=True).first()) or 0


def _verdict(call: ToolCall, why: str, ended: bool, cause: str) -> tuple[str, str, str]:
    """Return (status, error class, message) for a call whose holder is gone."""
    if call.effect != "write":
        return (TC.CANCELLED if ended else TC.PENDING, ABANDONED,
                f"{why}: this read was abandoned in flight; nothing to undo")
    if call.idempotent and not ended:
        return (TC.PENDING, ABANDONED, f"{why}: this keyed write was abandoned in flight; "
                "its key makes running it again safe")
    if call.probeable:
        how = "it has a probe, but not-found means not-done only after its hard deadline"
    elif call.idempotent:
        how = "its key makes a repeat safe if it is needed again"
    else:
        how = "it is not safe to repeat"
    return (TC.UNKNOWN, cause,
            f"{why}: this write was in flight and may have happened ({how}); "
            "confirm whether it did")


# A run in one of these is held by nobody and is not about to be: queued and running runs
# reconcile their own calls (tool_phase), a waiting one may have a call parked (parking.py).
STOPPED = (RunStatus.BLOCKED, RunStatus.UNKNOWN, *TERMINAL)


def stragglers_sweep(*, limit: int = 100) -> list[Any]:
    """Close the calls stopped runs left running, whatever stopped them; return the run ids.

    The stops that know of it close them at once (recovery limit, cancel); this catches any
    other (a run blocked by its restored session before it reconciled a dead worker's call).
    """
    ids = list(ToolCall.objects.filter(status=TC.RUNNING, run__status__in=STOPPED)
               .order_by().values_list("run_id", flat=True).distinct()[:limit])
    swept = []
    for run_id in ids:
        with transaction.atomic():
            # skip_locked: a run locked now is being moved; the next sweep looks again.
            run = Run.objects.select_for_update(skip_locked=True).filter(pk=run_id).first()
            if run is None or run.status not in STOPPED:
                continue
            ended = run.status in TERMINAL
            if stragglers_close(run, why=f"the run stopped ({run.status}) with this call in "
                                "flight and no worker holding it", ended=ended,
                                cause="worker_lost"):
                swept.append(run_id)
    return swept
