"""One tool call (or a reply's batch of them), top to bottom: check, fence, run, settle, record.

As DBOS's step invocation: ``execute`` checks the budget, the tool's circuit breaker and its
concurrency/rate limits; fences a write (its attempt is marked ``running`` in a commit that
proves this worker still holds the lease, so a dead or paused worker's call is recognised on
recovery and repeated if idempotent, probed once it can no longer be in flight, or reported as
unknown, never silently repeated); runs the calls (ledger.services.execute, outside any
transaction); settles each outcome (probing an ambiguous write, ledger.services.probe) into
ledger fields, events and the run's next move; and records them in one unit
(ledger.services.record). Every call goes down a layer and returns: nothing here is called back.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings

from agentops import clock
from agentops.control import LeaseLost
from agentops.tools import ToolContext, ToolSpec
from agentops.writes import RowsUpdate, row_new
from ledger.models import ToolAttempt, ToolCall
from ledger.sealed import unseal
from ledger.services.execute import Outcome, run_calls
from ledger.services.limits import breaker_open, breaker_writes
from ledger.services.probe import contradiction_text, probe_call
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
from runs.engine.runtime.events import NewEvent, result_event
from runs.engine.runtime.fencing import hard_deadline, tool_timeout
from runs.engine.runtime.leases import heartbeat_for, lease_kept
from runs.engine.runtime.outcomes import block, go_unknown, retry_delay, wait
from runs.engine.runtime.read_rides import (
    attempt_held,
    attempt_settle_held,
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
            also.append(toolcall_update(c, S.RUNNING, attempts=c.attempts))
        else:
            toolcall_move(c, S.RUNNING)  # inserted below, already running
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
    for a in opened:
        a.tool_call.opened_attempt = a.attempt
        a.tool_call.opened_at = now
        if held:
            a.tool_call.held_attempt = a


def _run(session: RunSession, step: str, calls: list[ToolCall], *, fenced: bool,
         quick: bool) -> tuple[list[tuple[ToolCall, ToolContext, dict]], list[Outcome], dt.datetime]:
    """Dispatch ``calls`` outside any transaction, keeping the lease while they run (and,
    ``quick``: held reads, read_rides, the slot's pooled connection too: lease_kept)."""
    fenced_at = clock.monotonic()
    jobs = [call_job(session, step, c) for c in calls]
    started = clock.now()
    if fenced and clock.monotonic() - fenced_at > settings.AGENTOPS_LEASE_TTL_S:
        # Paused between the fence and the dispatch: the hard deadline no longer holds.
        raise LeaseLost(f"run {session.run.pk}: the fence is older than the lease TTL")
    specs = [session.agent.tool(c.tool) for c, _, _ in jobs]
    with lease_kept(session.run, session.worker, [ctx.cancel for _, ctx, _ in jobs],
                    within_s=max(tool_timeout(spec) for spec in specs), quick=quick):
        outcomes = run_calls([(parkable(spec), ctx, args)
                              for spec, (_, ctx, args) in zip(specs, jobs)], session.secrets,
                             run_allowance(session))
    return jobs, outcomes, started


# --- 4. settle: one attempt's Outcome -> ledger fields, events, the run's next move ---

def settle(call: ToolCall, spec: ToolSpec, ctx: ToolContext, args: dict[str, Any],
           outcome: Outcome, started: dt.datetime, worker: str) -> Settlement:
    """Return the Settlement of ``outcome`` (probing an ambiguous write first)."""
    n = ctx.attempt
    if outcome.ambiguous and spec.probe is not None:
        outcome = probe_call(spec, ctx, args, outcome)
        if _maybe_in_flight(spec, ctx, outcome):
            return _recheck(call, n, ctx)
    if outcome.ok:
        return _succeeded(call, n, outcome, started, worker)
    attempt = _attempt(call, n, outcome, started, worker)
    if outcome.ambiguous and (not spec.idempotent or outcome.details.get("probe") == "different"):
        # A probe that found something else under the key: even an idempotent retry would
        # return that other effect as ours, so a person decides.
        return _unknown(call, n, outcome, attempt)
    if outcome.category == "invalid_arguments":
        return _model_visible_failure(call, n, outcome, attempt)
    if outcome.retryable and n - call.retry_base < spec.retry:
        delay = retry_delay(n, outcome.next_retry_delay)
        status = S.TIMED_OUT if outcome.status == "timed_out" else S.FAILED
        at = clock.now() + dt.timedelta(seconds=delay)
        ev = NewEvent(EventType.TOOL_ATTEMPT_FAILED, {"id": call.tool_call_id, "attempt": n,
                                              "category": outcome.category, "delay_s": delay},
                      tool_call_id=call.tool_call_id, attempt=n)
        return Settlement(call, status, {"attempts": n, "not_before": at,
                                         "error_class": outcome.category,
                                         "error": outcome.message[:500]},
                          [ev], attempt, "retry", at, outcome.category)
    exhausted = outcome.retryable
    category = outcome.category
    error = _error(outcome, exhausted)
    ev = result_event(call.tool_call_id, attempt=n, status="failed", error=error)
    detail = f"{call.tool} failed: {outcome.message}" + (
        f" (after {n} attempts)" if exhausted else "")
    return Settlement(call, S.FAILED, {"attempts": n, "error_class": category,
                                       "error": outcome.message[:500], "finished_at": clock.now()},
                      [ev], attempt, "block", category=category, detail=detail)


def _maybe_in_flight(spec: ToolSpec, ctx: ToolContext, outcome: Outcome) -> bool:
    """Return True when a probe found nothing but the attempt may still make its effect.

    Only for writes that are not idempotent: repeating an idempotent one is safe anyway.
    """
    return (not outcome.ok and not outcome.ambiguous and not spec.idempotent
            and ctx.deadline is not None and clock.now() < ctx.deadline)


def _recheck(call: ToolCall, n: int, ctx: ToolContext) -> Settlement:
    detail = (f"{call.tool} ({call.tool_call_id}) attempt {n} may still be in flight; "
              f"its probe found nothing, so it is probed again after its hard deadline "
              f"{ctx.deadline.isoformat()} before any retry")
    return Settlement(call, S.RUNNING, {}, [], None, "recheck", ctx.deadline,
                      "in_doubt", detail)


def _succeeded(call: ToolCall, n: int, outcome: Outcome, started: dt.datetime,
               worker: str) -> Settlement:
    r = outcome.result
    data: dict[str, Any] = {"status": "succeeded", "facts": r.facts, "summary": r.summary}
    if r.missing_fields:
        data["missing_fields"] = r.missing_fields
    if r.artifact:
        data["artifact"] = r.artifact
    if r.next_cursor:
        data["facts"] = {**r.facts, "next_cursor": r.next_cursor}
    fields = {"attempts": n, "facts": data["facts"], "summary": r.summary,
              "artifact_sha256": r.artifact, "missing_fields": r.missing_fields,
              "finished_at": clock.now(), "not_before": None, "error_class": "", "error": ""}
    attempt = _attempt(call, n, outcome, started, worker)
    if r.has_log:
        attempt.log_sha256 = r.artifact  # kept by retention while any attempt points at it
    return Settlement(call, S.SUCCEEDED, fields,
                      [result_event(call.tool_call_id, attempt=n, **data)], attempt)


def _unknown(call: ToolCall, n: int, outcome: Outcome, attempt: ToolAttempt) -> Settlement:
    probe = outcome.details.get("probe") or ("unreachable" if call.probeable else "none")
    data = {"id": call.tool_call_id, "attempt": n, "category": outcome.category, "probe": probe,
            "elapsed_ms": attempt.duration_ms}
    if probe == "different":
        data.update(differs=outcome.details.get("differs") or [],
                    found_summary=outcome.details.get("found_summary") or "")
    ev = NewEvent(EventType.TOOL_UNKNOWN, data, tool_call_id=call.tool_call_id, attempt=n)
    why = ("its probe could not be reached" if probe == "unreachable"
           else contradiction_text(call.tool, data["differs"], data["found_summary"])
           if probe == "different" else "it has no idempotency key and no probe")
    said = f" ({outcome.message[:300]})" if outcome.message else ""
    detail = (f"{call.tool} ({call.tool_call_id}) {outcome.category} after it may have run"
              f"{said}; {why}, so only a person can say whether it happened")
    return Settlement(call, S.UNKNOWN, {"attempts": n, "error_class": outcome.category,
                                        "error": outcome.message[:500]},
                      [ev], attempt, "unknown", detail=detail, category="ambiguous_write")


def _model_visible_failure(call: ToolCall, n: int, outcome: Outcome,
                           attempt: ToolAttempt) -> Settlement:
    error = {"category": outcome.category, "retryable": True, "message": outcome.message[:500],
             "next": "fix the arguments and call the tool again"}
    return Settlement(call, S.FAILED, {"attempts": n, "error_class": outcome.category,
                                       "error": outcome.message[:500], "finished_at": clock.now()},
                      [result_event(call.tool_call_id, attempt=n, status="failed", error=error)],
                      attempt)


def _error(outcome: Outcome, exhausted: bool) -> dict[str, Any]:
    return {"category": outcome.category, "retryable": False, "message": outcome.message[:500],
            "next": "the operator decides; do not repeat this call" if not exhausted
            else "retries are exhausted; the operator decides"}


def _attempt(call: ToolCall, n: int, outcome: Outcome, started: dt.datetime,
             worker: str) -> ToolAttempt:
    now = clock.now()
    status = {"succeeded": S.SUCCEEDED, "timed_out": S.TIMED_OUT}.get(outcome.status, S.FAILED)
    return row_new(ToolAttempt, tool_call=call, attempt=n, status=status, worker=worker,
                   error_class=outcome.category, error=outcome.message[:500],
                   started_at=started, finished_at=now,
                   duration_ms=int((now - started).total_seconds() * 1000))


# --- 5. record ---

def record_settled(session: RunSession, step: str, settled: list[Settlement],
                   events: list[NewEvent], new_rows: bool) -> None:
    """Record the settled attempts (ledger rows, attempts, breaker, events) in one unit."""
    evs, also, fresh_attempts = list(events), [], []
    for st in settled:
        evs.extend(st.events)
        held = attempt_held(st.call)
        if new_rows or held is not None:
            # Inserted below, or by the held unit this one writes first, with its outcome.
            toolcall_move(st.call, st.status, **st.fields)
        else:
            also.append(toolcall_update(st.call, st.status, **st.fields))
        if st.attempt is not None:
            if held is not None and held.attempt == st.attempt.attempt:
                attempt_settle_held(held, st.attempt)
            elif getattr(st.call, "opened_attempt", None) == st.attempt.attempt:
                also.append(_attempt_close(st.attempt))
            else:
                fresh_attempts.append(st.attempt)
    if new_rows:
        also.insert(0, toolcalls_insert([st.call for st in settled]))
    also.append(attempts_insert(fresh_attempts))
    also.extend(w for st in settled for w in getattr(st, "writes", ()))
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
