"""One tool call (or a reply's batch of them), top to bottom: check, fence, run, settle, record.

As DBOS's step invocation: ``execute`` checks the budget, the tool's circuit breaker and its
concurrency/rate limits; fences a write (its attempt is marked ``running`` in a commit that
proves this worker still holds the lease, so a dead or paused worker's call is recognised on
recovery and repeated if idempotent, probed once it can no longer be in flight, or reported as
unknown, never silently repeated); runs the calls (ledger.services.execute, outside any
transaction); settles each outcome (runs.engine.runtime.tool_settle) into ledger fields, events and
the run's next move; and records them in one unit
(ledger.services.record). Every call goes down a layer and returns: nothing here is called back.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings

from agentops import clock
from agentops.control import LeaseLost
from agentops.tools import ToolContext
from agentops.writes import RowsUpdate, row_new
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
from runs.engine.runtime import telemetry, trace_spans
from runs.engine.runtime.budgets import budget_exhausted, failures_spent
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.fencing import hard_deadline, tool_timeout
from runs.engine.runtime.leases import heartbeat_for, lease_kept
from runs.engine.runtime.outcomes import block, go_unknown, wait
from runs.engine.runtime.read_rides import (
    attempt_held,
    held_calls,
    reads_held,
    reads_timed,
    results_ride,
)
from runs.engine.runtime.parking import (
    late_results_record,
    limits_gate,
    park_commit,
    parkable,
    parked_settlement,
)
from runs.engine.runtime.session import RunSession
from runs.engine.runtime.settlement import Settlement
from runs.engine.runtime.world import versions_first_used
from runs.engine.runtime.tool_settle import settle
from runs.engine.runtime.working_set import run_allowance, state_too_big
from runs.event_types import EventType
from runs.models import run_id_text


def execute(session: RunSession, step: str, calls: list[ToolCall], events: list[NewEvent],
            *, new_rows: bool = False) -> None:
    """Check, fence, run, settle and record ``calls`` (in parallel when several) with ``events``.

    ``new_rows``: the calls' ledger rows are not inserted yet (a reply's reads run inline).
    """
    if not _admitted(session, step, calls, events, new_rows):  # 1. check
        return
    writes = [c for c in calls if c.effect == "write"]
    # 2. fence: every call's attempt opens in a unit proving the lease; a write's is committed
    # before it runs, a batch of reads' is sent before they run (a call run again after its
    # worker died gets the next attempt number, if that unit committed), or held with its
    # reply's until they ran, when their tools answer quickly (read_rides)
    held = new_rows and reads_held(session, calls)
    _mark_running(session, calls, events, new_rows, held=held,
                  wait=bool(writes) or len({c.idempotency_key for c in calls}) < len(calls))
    events, new_rows = [], False
    jobs, outcomes, started = _run(session, step, calls, fenced=bool(writes), quick=held)  # 3. run
    settled = [parked_settlement(session, c, ctx)  # 4. settle
               or settle(c, session.agent.tool(c.tool), ctx, args, o, started, session.worker)
               for (c, ctx, args), o in zip(jobs, outcomes)]
    reads_timed(session, settled)
    telemetry.tools_settled(settled, started,
                            trace_spans.tools_settled(session, step, settled, started))
    try:
        record_settled(session, step, settled, events, new_rows)  # 5. record
    except LeaseLost:
        if not held_calls(settled):  # a held reply never reached the log: nothing to close
            late_results_record(session, settled, new_rows)
        raise


# --- 1. check: budget, circuit breaker, concurrency and rate limits ---

def _admitted(session: RunSession, step: str, calls: list[ToolCall], events: list[NewEvent],
              new_rows: bool) -> bool:
    """Return True when the budget, the breakers and the limits let ``calls`` run now."""
    why = budget_exhausted(session.run, session.state["usage"])
    if why:
        _commit_rows_then(session, calls, events, new_rows)
        block(session, "budget", f"budget exhausted before calling tools: {why}")
        return False
    too_big = state_too_big(session)
    if too_big:
        _commit_rows_then(session, calls, events, new_rows)
        block(session, "memory_budget", too_big)
        return False
    for c in calls:
        if breaker_open(session.tool_limits, c.tool):
            _commit_rows_then(session, calls, events, new_rows)
            block(session, "circuit_open", f"the circuit breaker of {c.tool} is open",
                  tool=c.tool, tool_call_id=c.tool_call_id)
            return False
    return new_rows or limits_gate(session, step, calls)


def _commit_rows_then(session: RunSession, calls: list[ToolCall], events: list[NewEvent],
                      new_rows: bool) -> None:
    if new_rows or events:
        session.commit(events, also=[toolcalls_insert(calls)] if new_rows else [])


# --- 2. fence, 3. run ---

def call_job(session: RunSession, step: str, call: ToolCall) -> tuple[ToolCall, ToolContext, dict]:
    """Return (call, its ToolContext, its arguments unsealed) for one attempt."""
    args = dict(call.approved_args or call.args)
    args.update(unseal(call.sealed_args))
    ctx = ToolContext(run_id=run_id_text(session.run), step=step, tool_call_id=call.tool_call_id,
                      attempt=call.attempts + 1, idempotency_key=call.idempotency_key)
    ctx.heartbeat = heartbeat_for(session.run, session.worker, [ctx.cancel])
    opened_at = getattr(call, "opened_at", None)
    if opened_at is not None:
        ctx.fencing_token = session.run.version
        ctx.deadline = hard_deadline(session.agent.tool(call.tool), opened_at)
    return call, ctx, args


def _mark_running(session: RunSession, calls: list[ToolCall], events: list[NewEvent],
                  new_rows: bool, *, wait: bool, held: bool = False) -> None:
    """Open an attempt of each call in one fenced unit (lease proven, then renewed).

    ``wait`` (a write among them): committed before any effect. Reads only: sent, and
    PostgreSQL commits it while they run; the writers settling them name the rows by their
    ``tool_call_id`` (their ids come back once the unit is read), and the next unit learns
    whether it committed (docs/workers.md, "Fencing"). ``held`` (a reply's quick reads):
    deferred, written with their results, its rows inserted as they are then (read_rides)."""
    also = [toolcalls_insert(calls)] if new_rows else []
    evs = list(events)
    now = clock.now()
    opened = []
    for c in calls:
        n = c.attempts + 1
        if not new_rows:
            also.append(toolcall_update(c, S.RUNNING, at=now, attempts=c.attempts))
        else:
            toolcall_move(c, S.RUNNING, at=now)  # inserted below, already running
        opened.append(row_new(ToolAttempt, tool_call=c, attempt=n, status=S.RUNNING,
                              worker=session.worker, started_at=now))
        evs.append(NewEvent(EventType.TOOL_STARTED, {"id": c.tool_call_id, "attempt": n},
                            tool_call_id=c.tool_call_id, attempt=n))
    also.append(attempts_insert(opened))
    if held:
        session.defer(evs + versions_first_used(session, calls), also=also)
    else:
        session.commit(evs + versions_first_used(session, calls), also=also, fence=True,
                       wait=wait)
    for c, a in zip(calls, opened):  # a.tool_call is c (read through its descriptor)
        c.opened_attempt = a.attempt
        c.opened_at = now
        if held:
            c.held_attempt = a


def _run(session: RunSession, step: str, calls: list[ToolCall], *, fenced: bool,
         quick: bool) -> tuple[list[tuple[ToolCall, ToolContext, dict]], list[Outcome], dt.datetime]:
    """Dispatch ``calls`` outside any transaction, keeping the lease while they run (and,
    ``quick``: held reads, read_rides, the slot's pooled connection too: lease_kept)."""
    fenced_at = clock.monotonic()
    jobs = [call_job(session, step, c) for c in calls]
    # Held reads: nothing was committed since their attempts opened, so they started then.
    started = calls[0].opened_at if quick else clock.now()
    if fenced and clock.monotonic() - fenced_at > settings.AGENTOPS_LEASE_TTL_S:
        # Paused between the fence and the dispatch: the hard deadline no longer holds.
        raise LeaseLost(f"run {session.run.pk}: the fence is older than the lease TTL")
    cancels, timeouts, runs = [], [], []
    for call, ctx, args in jobs:  # one pass: a reply asks for one or a few calls
        spec = session.agent.tool(call.tool)
        cancels.append(ctx.cancel)
        timeouts.append(tool_timeout(spec))
        runs.append((parkable(spec), ctx, args))
    with lease_kept(session.run, session.worker, cancels, within_s=max(timeouts), quick=quick):
        outcomes = run_calls(runs, session.secrets, run_allowance(session))
    return jobs, outcomes, started


# --- 5. record ---

def record_settled(session: RunSession, step: str, settled: list[Settlement],
                   events: list[NewEvent], new_rows: bool) -> None:
    """Record the settled attempts (ledger rows, attempts, breaker, events) in one unit."""
    evs, also, fresh_attempts, writes = list(events), [], [], []
    for st in settled:
        evs.extend(st.events)
        writes.extend(getattr(st, "writes", ()))
        held = attempt_held(st.call)
        at = st.fields.get("finished_at")  # a finished call's row last changed when it finished
        if new_rows or held is not None:
            # Inserted below, or by the held unit this one writes first, with its outcome.
            toolcall_move(st.call, st.status, at=at, **st.fields)
        else:
            also.append(toolcall_update(st.call, st.status, at=at, **st.fields))
        # A held attempt row is settled in place (tool_settle._attempt): the held unit inserts it.
        if st.attempt is not None and st.attempt is not held:
            if getattr(st.call, "opened_attempt", None) == st.attempt.attempt:
                also.append(_attempt_close(st.attempt))
            else:
                fresh_attempts.append(st.attempt)
    if new_rows:
        also.insert(0, toolcalls_insert([st.call for st in settled]))
    also.append(attempts_insert(fresh_attempts))
    also.extend(writes)
    also.extend(breaker_writes(session.tool_limits, [(st.call.tool, st.status == S.SUCCEEDED,
                                                      st.category) for st in settled],
                               team_id=session.run.team_id))
    _finish(session, step, settled, evs, also)


def _finish(session: RunSession, step: str, settled: list[Settlement], evs: list[NewEvent],
            also: list[Any]) -> None:
    unknown = [s for s in settled if s.next == "unknown"]
    blocked = [s for s in settled if s.next == "block"]
    # "recheck": a probe found nothing while the attempt may still be in flight; the call
    # stays running and is probed again once its hard deadline has passed.
    retry = [s for s in settled if s.next in ("retry", "recheck")]
    parked = [s for s in settled if s.next == "park"]
    spent = failures_spent(session.run, session.state, evs) if retry else None
    if spent and not unknown and not blocked:
        s = retry[0]
        block(session, "failure_budget", f"{spent}; the last: {s.call.tool} ({s.category})",
              events=evs, also=also, tool=s.call.tool, tool_call_id=s.call.tool_call_id)
    elif unknown:
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
        if results_ride(session, settled):
            session.defer(evs, also=also, riding=settled)
        else:
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
