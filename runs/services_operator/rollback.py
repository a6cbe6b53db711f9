"""Rollback: undo the reversible side effects since a checkpoint, then restore the run to it.

Compensations are calls to the outside world, so they run outside any transaction, one at a
time in reverse order, each recorded (ledger row ``compensated`` + a ``tool.compensated``
event) in its own short commit; a rollback that stops half-way can be run again and skips
what is already undone. Effects that cannot be undone by code (irreversible, manual, no
compensation, or unknown) form a checklist the operator must tick first. The restore is a
``run.rolled_back`` event carrying the checkpoint's state, so the log stays append-only and
replaying it gives the same state.

What happens once restored is ``then``: ``hold`` (the default) blocks the run at the
checkpoint with reason ``rolled_back`` until a person retries, skips or ends it, so nothing
undone is made again by itself; ``terminate`` ends it (compensate and cancel, one action);
``resume`` queues it at once (the steps after the checkpoint run again and may redo the
undone writes, with new keys).
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Q

from agentops import clock
from agentops.agents import registry
from agentops.tools import ToolContext, ToolResult, ToolSpec
from approvals.errors import ActionNotApplicable
from approvals.statuses import ApprovalStatus
from approvals.transition import approvals_close_pending
from ledger.models import ToolCall
from ledger.sealed import unseal
from ledger.secrets import run_secrets
from ledger.services.execute import call_secrets_of
from ledger.services.record import toolcall_update
from ledger.statuses import DONE_OK
from ledger.statuses import ToolCallStatus as TC
from runs.engine.core import reducer
from runs.engine.runtime.events import NewEvent, event_append
from runs.engine.runtime.queue import run_enqueue
from runs.engine.runtime.snapshots import load_state, snapshot_build
from runs.engine.runtime.transition import run_transition
from runs.errors import UnknownAgent
from runs.event_types import EventType
from runs.models import Run
from runs.models.event import run_events
from runs.services_operator import rules
from runs.services_operator.common import ROLLBACK_OWNER, actor_name, run_locked, state_projection
from runs.services import run_cancel
from runs.engine.runtime.attention import attention_fields
from runs.statuses import BlockReason, RunStatus

ROLLBACK_STATUSES = rules.ROLLBACK
CLAIM_TTL = dt.timedelta(minutes=10)
THENS = ("hold", "terminate", "resume")
_CANCEL = (TC.PENDING, TC.FAILED, TC.TIMED_OUT, TC.AWAITING_APPROVAL, TC.CONFIRMED_NOT_EXECUTED)


@dataclass
class RollbackPlan:
    """What a rollback to ``to_seq`` will do to each tool call made since then."""

    to_seq: int
    state: dict[str, Any]
    compensate: list[ToolCall] = field(default_factory=list)
    checklist: list[tuple[ToolCall, str]] = field(default_factory=list)
    cancel: list[ToolCall] = field(default_factory=list)
    done: list[ToolCall] = field(default_factory=list)
    specs: dict[str, ToolSpec] = field(default_factory=dict)


def rollback_plan(*, run: Run, to_seq: int | None = None) -> RollbackPlan:
    """Return what rolling ``run`` back to ``to_seq`` (default: before the current step) does."""
    to_seq = _checkpoint(run, to_seq)
    state = load_state(run, upto_seq=to_seq)
    if state["open_calls"]:
        raise ActionNotApplicable(f"event #{to_seq} is in the middle of a tool call; choose a "
                                  "checkpoint between calls (a step boundary)", to_seq=to_seq)
    plan = RollbackPlan(to_seq=to_seq, state=state, specs=tool_specs(run))
    for call in _calls_since(run, to_seq):
        _classify(plan, call)
    return plan


def _checkpoint(run: Run, to_seq: int | None) -> int:
    if to_seq is None:
        first = (run_events(run).filter(type="step.started", data__step=run.current_step)
                 .order_by("seq").values_list("seq", flat=True).first())
        if not run.current_step or first is None:
            raise ActionNotApplicable("choose the checkpoint (event number) to roll back to")
        to_seq = first - 1
    if not 1 <= to_seq < run.last_seq:
        raise ActionNotApplicable(f"the checkpoint must be an event between #1 and "
                                  f"#{run.last_seq - 1}, not #{to_seq}")
    return to_seq


def tool_specs(run: Run) -> dict[str, ToolSpec]:
    """Return the run's pinned agent's tools by name ({} when that version is gone)."""
    try:
        return {t.name: t for t in registry.get(run.agent_name, run.agent_version).tools}
    except UnknownAgent:
        return {}


def _calls_since(run: Run, to_seq: int) -> list[ToolCall]:
    asked = run_events(run).filter(type="model.replied", seq__gt=to_seq)
    ids = [c["id"] for data in asked.values_list("data", flat=True) for c in data.get("calls", [])]
    # Newest first: compensations undo effects in the reverse order they happened.
    return list(ToolCall.objects.filter(run=run, tool_call_id__in=ids).order_by("-id"))


def _classify(plan: RollbackPlan, call: ToolCall) -> None:
    spec = plan.specs.get(call.tool)
    if call.effect == "read" or call.status in (TC.REJECTED, TC.CANCELLED):
        return
    if call.status == TC.COMPENSATED:
        plan.done.append(call)
    elif call.status in DONE_OK:
        if call.reversibility == "reversible" and spec is not None and spec.compensate:
            plan.compensate.append(call)
        else:
            why = call.reversibility if call.reversibility != "reversible" else "no compensation"
            plan.checklist.append((call, why))
    elif call.status in (TC.UNKNOWN, TC.RUNNING):
        plan.checklist.append((call, "may have happened (outcome unknown)"))
    elif call.status in _CANCEL:
        plan.cancel.append(call)


def run_rollback(*, run: Run, actor: Any, reason: str = "", to_seq: int | None = None,
                 ticked: list[str] | tuple[str, ...] = (), then: str = "hold") -> dict[str, Any]:
    """Compensate reversible effects since ``to_seq``, restore the run to it, then ``then``
    (hold: wait for a person there; terminate: end it; resume: go on at once)."""
    if then not in THENS:
        raise ActionNotApplicable(f"then must be one of {', '.join(THENS)}, not {then!r}")
    who = actor_name(actor)
    refusal = rules.status_refusal(run, ROLLBACK_STATUSES, "roll back")
    if refusal:
        raise ActionNotApplicable(refusal, status=run.status)
    plan = rollback_plan(run=run, to_seq=to_seq)
    missing = [(c, why) for c, why in plan.checklist if c.tool_call_id not in set(ticked)]
    if missing:
        raise ActionNotApplicable(
            "these effects cannot be undone automatically; handle them and tick each one "
            "first: " + "; ".join(f"{c.tool} ({c.tool_call_id}): {why}" for c, why in missing),
            unticked=[c.tool_call_id for c, _ in missing])
    rollback_claim(run, who)
    try:
        for call in plan.compensate:
            compensate_call(run, call, plan.specs[call.tool], who)
        return _restore(run, plan, who, reason, then)
    finally:
        Run.objects.filter(pk=run.pk, lease_owner=ROLLBACK_OWNER + who).update(
            lease_owner="", lease_expires_at=None)


def rollback_claim(run: Run, who: str) -> None:
    """Claim ``run`` for ``who``'s undo (released by clearing ``lease_owner``), or refuse."""
    # A conditional UPDATE: of two people rolling back at once only one claims the run, so
    # no compensation runs twice. The claim expires in case this process dies mid-way.
    now = clock.now()
    claimed = Run.objects.filter(pk=run.pk, status__in=ROLLBACK_STATUSES).filter(
        Q(lease_owner="") | Q(lease_expires_at__lt=now)).update(
        lease_owner=ROLLBACK_OWNER + who, lease_expires_at=now + CLAIM_TTL)
    if not claimed:
        run.refresh_from_db()
        holder = run.lease_owner.removeprefix(ROLLBACK_OWNER) or "someone"
        raise ActionNotApplicable(f"{holder} is already rolling this run back, or it moved on "
                                  f"(now {run.status})")


def compensate_call(run: Run, call: ToolCall, spec: ToolSpec, who: str) -> None:
    """Undo one standing write with its tool's compensation, recorded; raise if it fails."""
    args = dict(call.approved_args or call.args)
    args.update(unseal(call.sealed_args))
    # The undo has its own key, derived from the original one, so a retried rollback undoes
    # once; the original key travels beside it for tools that look the effect up by it.
    ctx = ToolContext(run_id=str(run.pk), step=call.step_key, tool_call_id=call.tool_call_id,
                      attempt=call.attempts, idempotency_key=f"{call.idempotency_key}:undo",
                      original_key=call.idempotency_key)
    try:
        raw = spec.compensate(ctx, call.facts or {}, **args)
        if not isinstance(raw, (ToolResult, dict)):
            # Only an acknowledged undo counts: an author's function that returns nothing
            # may have undone nothing, and "compensated" would then be a false fact.
            raise TypeError(f"it returned {type(raw).__name__}, not a ToolResult or dict of "
                            "facts acknowledging the undo")
    except Exception as exc:  # noqa: BLE001 - a failed compensation is reported, never lost
        message = call_secrets_of(spec, args, run_secrets(run.pk)).scrub_text(str(exc))
        event_append(run=run, events=[NewEvent(EventType.TOOL_COMPENSATION_FAILED, {
            "id": call.tool_call_id, "tool": call.tool, "message": message[:500], "by": who},
            tool_call_id=call.tool_call_id, actor=who)])
        raise ActionNotApplicable(f"the compensation of {call.tool} ({call.tool_call_id}) "
                                  f"failed: {message[:300]}; nothing was restored, and what "
                                  "was undone stays undone. Fix it and roll back again.",
                                  tool_call_id=call.tool_call_id) from None
    facts = raw.facts if isinstance(raw, ToolResult) else raw
    with transaction.atomic():
        event_append(run=run, events=[NewEvent(EventType.TOOL_COMPENSATED, {
            "id": call.tool_call_id, "tool": call.tool, "facts": facts, "by": who},
            tool_call_id=call.tool_call_id, actor=who)],
            also=[toolcall_update(call, TC.COMPENSATED, summary=f"compensated by {who}")])


def _restore(run: Run, plan: RollbackPlan, who: str, reason: str, then: str) -> dict[str, Any]:
    with run_locked(run, ROLLBACK_STATUSES, "roll back") as state:
        summary = {"to_seq": plan.to_seq, "then": then,
                   "compensated": [c.tool_call_id for c in [*plan.done, *plan.compensate]],
                   "ticked": [c.tool_call_id for c, _ in plan.checklist],
                   "cancelled": [c.tool_call_id for c in plan.cancel], "by": who,
                   "reason": reason[:500]}
        rolled = NewEvent(EventType.RUN_ROLLED_BACK, {**summary, "state": plan.state}, actor=who)
        new = reducer.fold(state, [{"seq": run.last_seq + 1, "type": rolled.type,
                                    "data": rolled.data},
                                   {"seq": run.last_seq + 2, "type": "run.status",
                                    "data": {"to": RunStatus.QUEUED}}])
        snap = snapshot_build(run_id=run.pk, state=new, phase="rolled_back",
                              agent_version=run.agent_version)
        also = [toolcall_update(c, TC.CANCELLED, finished_at=clock.now()) for c in plan.cancel]
        approvals_close_pending(run=run, to=ApprovalStatus.STALE,
                                reason=f"the run was rolled back to event #{plan.to_seq}")
        run_transition(run, RunStatus.QUEUED, reason="operator_rollback", detail=reason[:500],
                       actor=who, events=[rolled],
                       fields={**state_projection(new), "current_tool_call": ""},
                       also=[*also, snap.save])
        _then(run, new, then, who, reason)
    return summary


def _then(run: Run, state: dict[str, Any], then: str, who: str, reason: str) -> None:
    """Hold the restored run for a person, end it, or queue it (inside the restore's commit)."""
    if then == "resume":
        run_enqueue(run.pk)
    elif then == "terminate":
        run_cancel(run=run, actor=who, reason=reason or "rolled back and terminated")
    else:
        detail = (f"rolled back by {who}; it waits here for a person: retry to go on from "
                  "this checkpoint, or terminate")
        run_transition(run, RunStatus.BLOCKED, reason=BlockReason.ROLLED_BACK, detail=detail,
                       actor=who, fields=attention_fields(
                           run=run, category="rolled_back", detail=detail, state=state))
