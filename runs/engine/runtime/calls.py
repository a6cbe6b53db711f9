"""From a model reply to ledger rows: ids, idempotency keys, dedup, approvals, redaction."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentops import clock
from agentops.redaction import Secrets
from agentops.writes import row_new
from agentops.tools import ToolSpec
from approvals.records import approval_build, approval_needed, approvals_insert
from ledger.keys import args_hash, idempotency_key, redact
from ledger.models import ToolCall
from ledger.sealed import seal
from ledger.services.record import toolcall_move, toolcalls_insert
from ledger.statuses import DONE_OK, REDOABLE, ToolCallStatus
from runs.engine.runtime.events import NewEvent, result_event
from runs.engine.runtime.session import RunSession
from runs.models import run_id_text


@dataclass
class PlannedCall:
    """One tool call of a reply, on its way into the ledger."""

    index: int
    call_id: str
    name: str
    args: dict[str, Any] | None
    provider_id: str
    spec: ToolSpec | None
    error: str = ""
    key: str = ""
    row: ToolCall | None = None
    generation: int = 1
    supersedes: str = ""

    def event_json(self) -> dict[str, Any]:
        """Return the call as the model.replied event records it (sensitive args redacted)."""
        args = self.args if self.args is not None else {}
        if self.spec is not None:
            args = redact(args, self.spec.sensitive)
        return {"id": self.call_id, "name": self.name, "args": args,
                "provider_id": self.provider_id}


def plan_calls(session: RunSession, step: str, turn: int, planned: list[PlannedCall],
               replied: NewEvent, inline: Callable[..., None]) -> None:
    """Record the reply with its ledger rows; run plain reads inline in the same unit."""
    events: list[NewEvent] = [replied]
    valid = [p for p in planned if not p.error]
    run_id = run_id_text(session.run)
    for p in valid:
        p.key = idempotency_key(run_id=run_id, step=step, tool=p.name, args=p.args or {},
                                turn=None if p.spec.is_write else turn)
    existing = _existing(session.run.pk, [p.key for p in valid if p.spec.is_write])
    for p in valid:
        _next_generation(session, step, p, existing)
    rows, approvals, refused = [], [], []
    for p in planned:
        if p.error:
            refused.append(_refused_row(session, step, turn, p))
            events.append(result_event(p.call_id, status="failed", refused=True, error={
                "category": "invalid_arguments", "retryable": True, "message": p.error,
                "next": "fix the arguments and call the tool again"}))
        elif p.key in existing:
            events.append(_dedup_result(p, existing[p.key]))
        else:
            p.row = _row(session, step, turn, p)
            rows.append(p.row)
            reason = approval_needed(p.spec, p.args or {})
            if reason:
                toolcall_move(p.row, ToolCallStatus.AWAITING_APPROVAL)
                approvals.append(approval_build(run=session.run, call=p.row, spec=p.spec,
                                                why=reason, state=session.state))
    if rows and not approvals and not refused and all(_inline_ok(session, p)
                                                      for p in valid if p.row):
        inline(session, step, turn, [p for p in valid if p.row], events)
        return
    also = [toolcalls_insert(rows + refused)] if rows or refused else []
    if approvals:
        also.append(approvals_insert(approvals))
    session.commit(events, also=also)
    session.calls.update((r.tool_call_id, r) for r in rows)


def _next_generation(session: RunSession, step: str, p: PlannedCall,
                     existing: dict[str, ToolCall]) -> None:
    """Give a write whose earlier call was cancelled or undone the next generation's key."""
    prior = existing.get(p.key)
    while p.spec.is_write and prior is not None and prior.status in REDOABLE:
        p.generation, p.supersedes = prior.generation + 1, prior.tool_call_id
        p.key = idempotency_key(run_id=run_id_text(session.run), step=step, tool=p.name,
                                args=p.args or {}, generation=p.generation)
        existing.update(_existing(session.run.pk, [p.key]))
        prior = existing.get(p.key)


def _refused_row(session: RunSession, step: str, turn: int, p: PlannedCall) -> ToolCall:
    """Return the ledger row of a call refused before dispatch (visible and counted)."""
    args = p.args if isinstance(p.args, dict) else {}
    if p.spec is not None:
        args = redact(args, p.spec.sensitive)
    return ToolCall(
        tool_call_id=p.call_id, provider_call_id=p.provider_id[:200], run_id=session.run.pk,
        step_key=step, turn=turn, index=p.index, tool=p.name[:100], args=args,
        args_hash=args_hash(args), idempotency_key=args_hash({"refused": p.call_id}),
        effect=p.spec.effect if p.spec else "read", status=ToolCallStatus.REFUSED,
        error_class="invalid_arguments", error=p.error[:500], finished_at=clock.now(),
    )


def _existing(run_id: Any, keys: list[str]) -> dict[str, ToolCall]:
    if not keys:
        return {}
    rows = ToolCall.objects.filter(run_id=run_id, idempotency_key__in=keys)  # toolcall_unique_run_key
    return {r.idempotency_key: r for r in rows}


def _dedup_result(p: PlannedCall, prior: ToolCall) -> NewEvent:
    if prior.status in DONE_OK:
        return result_event(p.call_id, status="succeeded", facts=prior.facts,
                            summary=prior.summary, deduplicated=True, same_as=prior.tool_call_id)
    return result_event(p.call_id, status="failed", deduplicated=True, same_as=prior.tool_call_id,
                        error={"category": "duplicate", "retryable": False,
                               "message": f"this exact call was already made as "
                                          f"{prior.tool_call_id} ({prior.status}); not repeated",
                               "next": "use the earlier result or change the arguments"})


def _row(session: RunSession, step: str, turn: int, p: PlannedCall) -> ToolCall:
    spec, args = p.spec, p.args or {}
    # A declared-sensitive argument, or any argument carrying a secret the run already knows
    # (the model passing a PIN on to another tool), is sealed and stored redacted.
    known = session.secrets
    names = tuple(k for k, v in args.items() if k in spec.sensitive
                  or (known and known.found_in(json.dumps(v, ensure_ascii=False)))
                  ) if spec.sensitive or known else ()  # most tools: nothing to look for
    sensitive = {k: args[k] for k in names} if names else {}
    if sensitive:  # known from now on: this unit's events (reply, results) are scrubbed of it
        session.secrets = session.secrets | Secrets.of(sensitive.values())
    return row_new(
        ToolCall,
        tool_call_id=p.call_id, provider_call_id=p.provider_id[:200], run_id=session.run.pk,
        step_key=step, turn=turn, index=p.index, tool=p.name, args=redact(args, names),
        args_hash=args_hash(args), idempotency_key=p.key, effect=spec.effect,
        idempotent=spec.idempotent, probeable=spec.probe is not None,
        reversibility=spec.reversibility, sealed_args=seal(sensitive),
        generation=p.generation, supersedes=p.supersedes,
    )


def _inline_ok(session: RunSession, p: PlannedCall) -> bool:
    spec, limit = p.spec, session.tool_limits.get(p.name)
    limited = limit is not None and (limit.concurrency or limit.rate_per_minute
                                     or limit.breaker_opened_at)
    return not spec.is_write and spec.concurrency is None and spec.rate is None and not limited
