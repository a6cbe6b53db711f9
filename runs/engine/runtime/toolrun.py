"""The tool phase: run the step's open calls, record their outcomes, decide what comes next.

Reads run straight away (a crash just runs them again). Every write is fenced first: its
attempt is marked ``running`` in a commit that checks this worker still holds the lease
(runs.engine.runtime.fencing), so a dead or paused worker's call is recognised on recovery and
repeated (idempotent), probed once it can no longer be in flight, or reported as unknown;
never silently repeated.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings

from agentops import clock
from agentops.tools import ToolContext
from agentops.writes import RowsUpdate
from ledger.models import ToolAttempt, ToolCall
from ledger.sealed import unseal
from ledger.services.execute import Outcome, run_calls
from ledger.services.limits import breaker_open, breaker_writes
from ledger.services.record import (
    attempt_finish,
    attempts_insert,
    toolcall_move,
    toolcall_update,
    toolcalls_insert,
)
from ledger.statuses import ToolCallStatus as S
from runs.engine.runtime import telemetry
from runs.engine.runtime.budgets import budget_exhausted
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.fencing import attempt_started, hard_deadline
from runs.engine.runtime.leases import heartbeat_for, lease_kept
from runs.engine.runtime.outcomes import block, go_unknown, wait
from runs.engine.runtime.parking import (
    late_results_record,
    limits_gate,
    park_commit,
    parkable,
    parked_settlement,
)
from runs.engine.runtime.session import RunSession
from runs.engine.runtime.settle import Settlement, settle
from agentops.control import LeaseLost
from runs.event_types import EventType
from approvals.records import approval_pending_for_run

_RUNNABLE = {S.PENDING, S.CONFIRMED_NOT_EXECUTED, S.TIMED_OUT, S.FAILED}


def tool_phase(session: RunSession, step: str, open_ids: list[str]) -> None:
    """Advance the step's open calls: run what can run, else wait or stop for a person."""
    rows = {i: session.calls[i] for i in open_ids if i in session.calls}
    missing = [i for i in open_ids if i not in rows]
    if missing:
        rows.update((r.tool_call_id, r) for r in ToolCall.objects.filter(tool_call_id__in=missing))
    calls = [rows[i] for i in open_ids if i in rows]
    unknown = [c for c in calls if c.status == S.UNKNOWN]
    recovered = [c for c in calls if c.status == S.RUNNING]
    for call in recovered:
        _reconcile(session, call)
        if session.stopped:
            return
    now = clock.now()
    runnable = [c for c in calls if c.status in _RUNNABLE and (c.not_before is None or c.not_before <= now)]
    if unknown:
        c = unknown[0]
        go_unknown(session, tool=c.tool, tool_call_id=c.tool_call_id,
                   detail=f"{c.tool} ({c.tool_call_id}) outcome unknown; confirm it")
    elif runnable:
        execute(session, step, runnable, [])
    elif any(c.status in _RUNNABLE for c in calls):
        until = min(c.not_before for c in calls if c.status in _RUNNABLE)
        wait(session, kind="timer", until=until, data={"reason": "tool retry backoff", "step": step})
    elif any(c.status == S.AWAITING_APPROVAL for c in calls):
        _wait_approval(session, [c for c in calls if c.status == S.AWAITING_APPROVAL])


def execute_reads_inline(session: RunSession, step: str, turn: int, planned: list[Any],
                         events: list[NewEvent]) -> None:
    """Run a reply's plain reads now and commit reply, rows and results as one unit."""
    rows = [p.row for p in planned]
    execute(session, step, rows, events, new_rows=True)


def execute(session: RunSession, step: str, calls: list[ToolCall], events: list[NewEvent],
            *, new_rows: bool = False) -> None:
    """Run ``calls`` (in parallel when several) and commit their outcomes with ``events``."""
    why = budget_exhausted(session.run, session.state["usage"])
    if why:
        _commit_rows_then(session, calls, events, new_rows)
        block(session, "budget", f"budget exhausted before calling tools: {why}")
        return
    for c in calls:
        if breaker_open(session.tool_limits, c.tool):
            _commit_rows_then(session, calls, events, new_rows)
            block(session, "circuit_open", f"the circuit breaker of {c.tool} is open",
                  tool=c.tool, tool_call_id=c.tool_call_id)
            return
    if not new_rows and not limits_gate(session, step, calls):
        return
    writes = [c for c in calls if c.effect == "write"]
    if writes:
        _mark_running(session, calls, writes, events, new_rows)
        events, new_rows = [], False
    fenced_at = clock.monotonic()
    jobs = [_job(session, step, c) for c in calls]
    started = clock.now()
    if writes and clock.monotonic() - fenced_at > settings.AGENTOPS_LEASE_TTL_S:
        # Paused between the fence and the dispatch: the hard deadline no longer holds.
        raise LeaseLost(f"run {session.run.pk}: the fence is older than the lease TTL")
    with lease_kept(session.run, session.worker, [ctx.cancel for _, ctx, _ in jobs]):
        outcomes = run_calls([(parkable(session.agent.tool(c.tool)), ctx, args)
                              for c, ctx, args in jobs], session.secrets)
    settled = [parked_settlement(session, c, ctx)
               or settle(c, session.agent.tool(c.tool), ctx, args, o, started, session.worker)
               for (c, ctx, args), o in zip(jobs, outcomes)]
    telemetry.tools_settled(settled, started)
    try:
        _record(session, step, settled, events, new_rows)
    except LeaseLost:
        late_results_record(session, settled, new_rows)
        raise


def _job(session: RunSession, step: str, call: ToolCall) -> tuple[ToolCall, ToolContext, dict]:
    args = dict(call.approved_args or call.args)
    args.update(unseal(call.sealed_args))
    ctx = ToolContext(run_id=str(session.run.pk), step=step, tool_call_id=call.tool_call_id,
                      attempt=call.attempts + 1, idempotency_key=call.idempotency_key)
    ctx.heartbeat = heartbeat_for(session.run, session.worker, [ctx.cancel])
    opened_at = getattr(call, "opened_at", None)
    if opened_at is not None:
        ctx.fencing_token = session.run.version
        ctx.deadline = hard_deadline(session.agent.tool(call.tool), opened_at)
    return call, ctx, args


def _mark_running(session: RunSession, calls: list[ToolCall], unsafe: list[ToolCall],
                  events: list[NewEvent], new_rows: bool) -> None:
    """Open an attempt of each write in one fenced commit (lease proven, then renewed)."""
    also = [toolcalls_insert(calls)] if new_rows else []
    evs = list(events)
    now = clock.now()
    opened = []
    for c in unsafe:
        n = c.attempts + 1
        if not new_rows:
            also.append(toolcall_update(c, S.RUNNING, attempts=c.attempts))
        else:
            toolcall_move(c, S.RUNNING)  # inserted below, already running
        opened.append(ToolAttempt(tool_call=c, attempt=n, status=S.RUNNING,
                                  worker=session.worker, started_at=now))
        evs.append(NewEvent(EventType.TOOL_STARTED, {"id": c.tool_call_id, "attempt": n},
                            tool_call_id=c.tool_call_id, attempt=n))
    also.append(attempts_insert(opened))
    session.commit(evs, also=also, fence=True)
    for a in opened:
        a.tool_call.opened_attempt = a.attempt
        a.tool_call.opened_at = now


def _record(session: RunSession, step: str, settled: list[Settlement], events: list[NewEvent],
            new_rows: bool) -> None:
    evs, also, fresh_attempts = list(events), [], []
    for st in settled:
        evs.extend(st.events)
        if new_rows:
            toolcall_move(st.call, st.status, **st.fields)  # inserted below with its outcome
        else:
            also.append(toolcall_update(st.call, st.status, **st.fields))
        if st.attempt is not None:
            if getattr(st.call, "opened_attempt", None) == st.attempt.attempt:
                also.append(_attempt_close(st.attempt))
            else:
                fresh_attempts.append(st.attempt)
    if new_rows:
        also.insert(0, toolcalls_insert([st.call for st in settled]))
    also.append(attempts_insert(fresh_attempts))
    also.extend(w for st in settled for w in getattr(st, "writes", ()))
    also.extend(breaker_writes(session.tool_limits, [(st.call.tool, st.status == S.SUCCEEDED, st.category) for st in settled]))
    _finish(session, step, settled, evs, also)


def _finish(session: RunSession, step: str, settled: list[Settlement], evs: list[NewEvent],
            also: list[Any]) -> None:
    unknown = [s for s in settled if s.next == "unknown"]
    blocked = [s for s in settled if s.next == "block"]
    # "recheck": a probe found nothing while the attempt may still be in flight; the call
    # stays running and is probed again once its hard deadline has passed.
    retry = [s for s in settled if s.next in ("retry", "recheck")]
    parked = [s for s in settled if s.next == "park"]
    if unknown:
        s = unknown[0]
        go_unknown(session, tool=s.call.tool, tool_call_id=s.call.tool_call_id, detail=s.detail,
                   events=evs, also=also)
    elif blocked:
        s = blocked[0]
        block(session, s.category, s.detail, events=evs, also=also, tool=s.call.tool,
              tool_call_id=s.call.tool_call_id)
    elif parked and not retry:
        park_commit(session, parked[0], evs, also)
    elif retry and min(s.retry_at for s in retry) > clock.now() + dt.timedelta(seconds=0.05):
        until = min(s.retry_at for s in retry)
        first = min(retry, key=lambda s: s.retry_at)
        reason = (f"retry {first.call.tool} after {first.category}" if first.next == "retry"
                  else first.detail)
        wait(session, kind="timer", until=until, events=evs, also=also,
             data={"reason": reason, "step": step})
    else:
        if not retry and not _open_in_step(session, step, settled):
            evs.append(NewEvent(EventType.MODEL_REQUESTED, {"step": step, "turn": session.state["turn"] + 1}))
        session.commit(evs, also=also)


def _open_in_step(session: RunSession, step: str, settled: list[Settlement]) -> bool:
    done = {s.call.tool_call_id for s in settled if s.next == "continue"}
    return any(c["step"] == step and cid not in done
               for cid, c in session.state["open_calls"].items())


def _attempt_close(attempt: ToolAttempt) -> RowsUpdate:
    return attempt_finish(attempt.tool_call, attempt.attempt, attempt.status,
                          error_class=attempt.error_class, error=attempt.error,
                          finished_at=attempt.finished_at, duration_ms=attempt.duration_ms,
                          log_sha256=attempt.log_sha256)


def _commit_rows_then(session: RunSession, calls: list[ToolCall], events: list[NewEvent],
                      new_rows: bool) -> None:
    if new_rows or events:
        session.commit(events, also=[toolcalls_insert(calls)] if new_rows else [])


def _reconcile(session: RunSession, call: ToolCall) -> None:
    """Settle a call left ``running`` (a dead or paused worker's, or one in doubt).

    Safe to repeat → run it again (same key). No probe → ``unknown``. A probe → ask the
    world; "not found" counts as "not done" only after the attempt's hard deadline.
    """
    spec = session.agent.tool(call.tool)
    n = call.attempts + 1
    if spec.safe_to_repeat:
        session.commit([NewEvent(EventType.TOOL_ATTEMPT_FAILED, {
            "id": call.tool_call_id, "attempt": n, "category": "worker_lost", "delay_s": 0},
                                 tool_call_id=call.tool_call_id, attempt=n)],
                       also=[toolcall_update(call, S.PENDING, attempts=n),
                             attempt_finish(call, n, S.TIMED_OUT, error_class="worker_lost",
                                            error="the worker running it was lost")])
        return
    if spec.probe is None:
        go_unknown(session, tool=call.tool, tool_call_id=call.tool_call_id,
                   detail=f"{call.tool} ({call.tool_call_id}) was running when its worker died; "
                          "it has no probe, so only a person can say whether it happened",
                   events=[NewEvent(EventType.TOOL_UNKNOWN, {"id": call.tool_call_id,
                                                     "attempt": n,
                                                     "category": "worker_lost",
                                                     "probe": "none"},
                                    tool_call_id=call.tool_call_id)],
                   also=[toolcall_update(call, S.UNKNOWN, attempts=n),
                         attempt_finish(call, n, S.UNKNOWN, error_class="worker_lost")])
        return
    _, ctx, args = _job(session, call.step_key, call)
    started = attempt_started(call, n)
    ctx.fencing_token = session.run.version
    ctx.deadline = hard_deadline(spec, started)
    lost = Outcome("timed_out", category="worker_lost", message="worker lost mid-call",
                   retryable=True, ambiguous=True)
    call.opened_attempt = n
    st = settle(call, spec, ctx, args, lost, started, session.worker)
    _record(session, call.step_key, [st], [], False)


def _wait_approval(session: RunSession, calls: list[ToolCall]) -> None:
    pending = approval_pending_for_run(session.run.pk)
    until = min((a.expires_at for a in pending if a.expires_at), default=None)
    wait(session, kind="approval", until=until,
         data={"tool_calls": [c.tool_call_id for c in calls], "tools": [c.tool for c in calls],
               "approvals": [a.pk for a in pending]})
