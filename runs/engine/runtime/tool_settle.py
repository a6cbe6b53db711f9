"""One tool attempt's Outcome settled: ledger fields, events and the run's next move.

Probes an ambiguous write first (ledger.services.probe); a write that may still be in flight
is probed again after its hard deadline; a retryable failure waits its backoff; an invalid
call goes back to the model; an ambiguous write no key or probe can settle goes to a person
(``unknown``). Called by runs.engine.runtime.tool_call for each attempt it ran.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from agentops import clock
from agentops.tools import ToolContext, ToolSpec
from agentops.writes import row_new
from ledger.models import ToolAttempt, ToolCall
from ledger.services.execute import Outcome
from ledger.services.probe import contradiction_text, probe_call
from ledger.services.record import row_fields_set
from ledger.statuses import ToolCallStatus as S
from runs.engine.runtime.events import NewEvent, result_event
from runs.engine.runtime.outcomes import retry_delay
from runs.engine.runtime.read_rides import attempt_held
from runs.engine.runtime.settlement import Settlement
from runs.event_types import EventType


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
    attempt = _attempt(call, n, outcome, started, worker)  # finished now: the call too
    fields = {"attempts": n, "facts": data["facts"], "summary": r.summary,
              "artifact_sha256": r.artifact, "missing_fields": r.missing_fields,
              "finished_at": attempt.finished_at, "not_before": None, "error_class": "",
              "error": ""}
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
    """Return attempt ``n`` of ``call`` closed with ``outcome``: the row a held unit will
    insert (read_rides), given the outcome in place, else a new row."""
    now = clock.now()
    status = {"succeeded": S.SUCCEEDED, "timed_out": S.TIMED_OUT}.get(outcome.status, S.FAILED)
    values = {"status": status, "worker": worker, "error_class": outcome.category,
              "error": outcome.message[:500], "started_at": started, "finished_at": now,
              "duration_ms": int((now - started).total_seconds() * 1000)}
    held = attempt_held(call)
    if held is not None and held.attempt == n:
        row_fields_set(held, values)
        return held
    return row_new(ToolAttempt, tool_call=call, attempt=n, **values)
