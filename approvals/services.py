"""Approval requests, decisions and expiry (the services the console and the API call).

A decision locks the approval row, so of two people deciding at once the first wins and the
second is told who decided. An approval binds to the exact arguments and to the run state it
was asked in: if the run moved on since, it goes stale instead of being decided.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from django.db import transaction

from agentops import clock
from agentops.agents import registry
from agentops.errors import InvalidInput
from agentops.tools import ToolSpec
from approvals.errors import AlreadyDecided, NotAllowed, StaleApproval
from approvals.models import Approval
from approvals.records import approvals_insert
from approvals.statuses import ApprovalStatus, ExpiryOutcome
from approvals.transition import approval_transition
from approvals.votes import vote_record
from ledger.keys import redact
from ledger.models import ToolCall
from ledger.sealed import seal, unseal
from ledger.services.record import toolcall_update
from ledger.statuses import ToolCallStatus as TC
from runs.engine.runtime.attention import attention_fields, block_reason
from runs.engine.runtime.events import NewEvent, event_append, result_event
from runs.engine.runtime.queue import run_enqueue
from runs.engine.runtime.snapshots import load_state
from runs.engine.runtime.transition import run_transition
from runs.engine.runtime.world import waited_s
from runs.errors import UnknownAgent
from runs.event_types import EventType
from runs.models import Run
from runs.services import run_cancel
from runs.statuses import TERMINAL, RunStatus, WaitKind

# A run waiting for a person writes only a few events; this many means it moved on.
STALE_AFTER_EVENTS = 100


def approval_lock(approval_id: int) -> Approval:
    """Return the approval locked for a decision; a decided one raises AlreadyDecided."""
    # No select_related: a join read while waiting for the lock would show the decider as it
    # was before the winner committed; decided_by is loaded after the lock, current.
    approval = Approval.objects.select_for_update().get(pk=approval_id)
    if approval.status != ApprovalStatus.PENDING:
        who = approval.decided_by.get_username() if approval.decided_by else "the system"
        raise AlreadyDecided(
            f"this approval was already {approval.status} by {who}",
            status=approval.status, decided_by=who,
        )
    return approval


def approval_decide(*, approval: Approval, user: Any, approve: bool, reason: str = "",
                    edited_args: dict[str, Any] | None = None) -> Approval:
    """Approve (optionally with edited arguments) or reject ``approval``; wake its run.

    Raises AlreadyDecided (naming who) when someone decided first, StaleApproval when the run
    moved on (the approval is then marked stale), NotAllowed for self-approval, and
    InvalidInput for a reject without a reason or edited arguments that fail the schema.
    """
    reason = (reason or "").strip()
    if not approve and not reason:
        raise InvalidInput("a reason is required to reject (the agent sees it)")
    stale = ""
    with transaction.atomic():
        a = approval_lock(approval.pk)
        if a.requested_by_id is not None and a.requested_by_id == getattr(user, "pk", None):
            raise NotAllowed("you asked for this approval; someone else must decide it")
        run = Run.objects.select_for_update().get(pk=a.run_id)
        stale = approval_stale_reason(a, run)
        if stale:
            _mark_stale(a, run, stale)
        else:
            _decide(a, run, user, approve, reason, edited_args)
    if stale:
        raise StaleApproval(f"this approval is stale: {stale}", reason=stale)
    approval.refresh_from_db()
    return approval


def approval_stale_reason(approval: Approval, run: Run) -> str:
    """Return why ``approval`` no longer applies to ``run`` ("" when it still does)."""
    if run.status in TERMINAL:
        return f"the run is {run.status}"
    if run.plan_version != approval.plan_version:
        return f"the plan changed (version {approval.plan_version} -> {run.plan_version})"
    if Run.objects.filter(forked_from=run, created_at__gte=approval.created_at).exists():
        return "the run was forked after the approval was asked"
    if run.last_seq - approval.state_seq > STALE_AFTER_EVENTS:
        return f"the run moved on (event #{approval.state_seq} -> #{run.last_seq})"
    call = approval.tool_call
    if call.status != TC.AWAITING_APPROVAL:
        return f"the tool call is {call.status}, no longer awaiting approval"
    return ""


def _decide(a: Approval, run: Run, user: Any, approve: bool, reason: str,
            edited_args: dict[str, Any] | None) -> None:
    if a.approvers_required > 1 and approve:
        if _more_approvers_needed(a, run, user, edited_args):
            return
        # the version every counted approval saw: the edited arguments, if any
        edited_args = a.approved_args if a.version > 1 else None
    call, who = a.tool_call, user.get_username()
    args = call.args if edited_args is None else _validated(run, a.tool, edited_args)
    data: dict[str, Any] = {"approval": a.pk, "tool_call_id": call.tool_call_id,
                            "decision": "approved" if approve else "rejected", "by": who,
                            "reason": reason[:2000], "edited": edited_args is not None}
    if approve:
        sealed: dict[str, Any] = {}
        if edited_args is not None:
            args, sealed = _sealed_edit(call, args, _sensitive(run, a.tool))
            data["args"] = args
        write = toolcall_update(call, TC.PENDING, approved_args=args, **sealed)
        events = [NewEvent(EventType.APPROVAL_DECIDED, data, tool_call_id=call.tool_call_id,
                           actor=who)]
    else:
        write = toolcall_update(call, TC.REJECTED, finished_at=clock.now(), error_class="rejected",
                                error=reason[:500])
        events = [NewEvent(EventType.APPROVAL_DECIDED, data, tool_call_id=call.tool_call_id, actor=who),
                  _rejected_result(call, reason, who)]
    approval_transition(a, ApprovalStatus.APPROVED if approve else ApprovalStatus.REJECTED,
                        reason=reason, user=user, approved_args=args if approve else None)
    _wake(run, events, [write], who)


def _more_approvers_needed(a: Approval, run: Run, user: Any,
                           edited_args: dict[str, Any] | None) -> bool:
    """Record one approval under the two-person rule; return True while more are needed."""
    if edited_args is not None:
        _edit_pending(a, run, edited_args)
    counted = vote_record(approval=a, user=user, approve=True)
    if counted >= a.approvers_required:
        return False
    event_append(run=run, events=[NewEvent(EventType.APPROVAL_VOTED, {
        "approval": a.pk, "tool_call_id": a.tool_call.tool_call_id, "by": user.get_username(),
        "version": a.version, "approvals": counted, "required": a.approvers_required,
    }, tool_call_id=a.tool_call.tool_call_id, actor=user.get_username())])
    return True


def _edit_pending(a: Approval, run: Run, edited_args: dict[str, Any]) -> None:
    """Make ``edited_args`` the version the other approvers decide (older approvals go stale)."""
    args, sensitive = _validated(run, a.tool, edited_args), _sensitive(run, a.tool)
    changed = sorted(k for k in sensitive if k in args
                     and not (isinstance(args[k], str) and args[k].startswith("[redacted")))
    if changed:
        raise InvalidInput(f"{', '.join(changed)} is sensitive and cannot be edited on an "
                           "approval that needs several approvers (the others could not see "
                           "it); reject with the right value as the reason", field="args")
    a.approved_args, a.version = redact(args, sensitive), a.version + 1
    a.save(update_fields=["approved_args", "version"])


def _sealed_edit(call: ToolCall, args: dict[str, Any],
                 sensitive: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return (the edited args redacted, the sealed_args update) for an edit of ``call``.

    An edited sensitive value is sealed with the call's other sealed values, never stored in
    clear; a redaction marker sent back unchanged keeps the sealed original.
    """
    edits = {k: v for k, v in args.items() if k in sensitive
             and not (isinstance(v, str) and v.startswith("[redacted"))}
    if not edits:
        return redact(args, sensitive), {}
    sealed = seal({**unseal(call.sealed_args), **edits})
    return redact(args, sensitive), {"sealed_args": sealed}


def _validated(run: Run, tool: str, args: Any) -> dict[str, Any]:
    spec = _spec(run, tool)
    if spec is None:
        raise InvalidInput(f"tool {tool} is not deployed here, so edited arguments cannot be "
                           "checked; approve or reject as proposed")
    try:
        return spec.validate(args)
    except Exception as exc:  # ToolInvalidArguments: say where the edit is wrong
        raise InvalidInput(getattr(exc, "message", str(exc)), field="args") from None


def _spec(run: Run, tool: str) -> ToolSpec | None:
    try:
        return registry.get(run.agent_name, run.agent_version).tool(tool)
    except UnknownAgent:
        return None


def _sensitive(run: Run, tool: str) -> tuple[str, ...]:
    spec = _spec(run, tool)
    return spec.sensitive if spec is not None else ()


def _rejected_result(call: ToolCall, reason: str, who: str, category: str = "rejected") -> NewEvent:
    # The model reads this as the tool's result: who said no, and why, in one sentence.
    message = f"rejected by {who}: {reason}" if category == "rejected" else reason
    return result_event(call.tool_call_id, status="rejected", error={
        "category": category, "retryable": False, "message": message[:2000], "by": who,
        "next": "do not make this call again as it was; find another way or finish the step"})


def _wake(run: Run, events: list[NewEvent], also: list[Callable[[], None]], who: str) -> None:
    """Append the decision and put a run waiting for approval back in the queue."""
    if run.status == RunStatus.WAITING and run.wait_kind == WaitKind.APPROVAL:
        ended = NewEvent(EventType.WAIT_ENDED, {"kind": WaitKind.APPROVAL, "by": who,
                                                "waited_s": waited_s(run)})
        run_transition(run, RunStatus.QUEUED, reason="approval_decided", actor=who,
                       events=[*events, ended], also=also)
        run_enqueue(run.pk)
    else:
        event_append(run=run, events=events, also=also)


def _mark_stale(a: Approval, run: Run, why: str) -> None:
    approval_transition(a, ApprovalStatus.STALE, reason=why)
    if run.status not in TERMINAL:
        event_append(run=run, events=[NewEvent(EventType.APPROVAL_STALE, {
            "approval": a.pk, "tool_call_id": a.tool_call.tool_call_id, "why": why})])
        _block_if_stuck(run, f"approval {a.pk} for {a.tool} went stale: {why}", a)


def _block_if_stuck(run: Run, detail: str, a: Approval) -> None:
    """Block a run left waiting for approvals nobody can give any more (an operator decides)."""
    waiting = run.status == RunStatus.WAITING and run.wait_kind == WaitKind.APPROVAL
    if not waiting or Approval.objects.filter(run=run, status=ApprovalStatus.PENDING).exists():
        return
    fields = attention_fields(run=run, category="approval_expired", detail=detail,
                              state=load_state(run), tool=a.tool,
                              tool_call_id=a.tool_call.tool_call_id)
    run_transition(run, RunStatus.BLOCKED, reason=block_reason("approval_expired"),
                   detail=detail, fields=fields)


def approval_expire(*, approval: Approval) -> str:
    """Apply an overdue approval's expiry outcome; return what happened ("" if not due)."""
    with transaction.atomic():
        try:
            a = approval_lock(approval.pk)
        except AlreadyDecided:
            return ""
        if a.expires_at is None or a.expires_at > clock.now():
            return ""
        run = Run.objects.select_for_update().get(pk=a.run_id)
        approval_transition(a, ApprovalStatus.EXPIRED, reason=f"nobody decided by "
                            f"{a.expires_at.isoformat(timespec='seconds')}")
        if run.status not in TERMINAL:
            _EXPIRY[a.expiry_outcome](a, run)
    return a.expiry_outcome


def _expire_deny(a: Approval, run: Run) -> None:
    call = a.tool_call
    data = {"approval": a.pk, "tool_call_id": call.tool_call_id, "outcome": "deny"}
    events = [NewEvent(EventType.APPROVAL_EXPIRED, data, tool_call_id=call.tool_call_id),
              _rejected_result(call, f"approval expired: not approved in time ({a.reason}); "
                                     "denied by default",
                               "system", category="approval_expired")]
    write = toolcall_update(call, TC.REJECTED, finished_at=clock.now(),
                            error_class="approval_expired", error=a.reason)
    _wake(run, events, [write], "")


def _expire_cancel(a: Approval, run: Run) -> None:
    if run.status not in TERMINAL:
        run_cancel(run=run, actor=None, reason=f"approval for {a.tool} expired: {a.reason}")


def _expire_rerequest(a: Approval, run: Run) -> None:
    spec = _spec(run, a.tool)
    window = dt.timedelta(seconds=spec.approval_expiry_s) if spec else a.expires_at - a.created_at
    fresh = Approval(
        run=run, tool_call=a.tool_call, tool=a.tool, proposed_args=a.proposed_args,
        risk=a.risk, why=a.why, state_seq=a.state_seq, plan_version=a.plan_version,
        requested_by=a.requested_by, expiry_outcome=a.expiry_outcome,
        approvers_required=a.approvers_required,
        expires_at=clock.now() + max(window, dt.timedelta(minutes=1)))
    approvals_insert([fresh])()  # routed and notified like the first ask, in this transaction
    fields = None
    if run.status == RunStatus.WAITING:
        data = dict(run.wait_data)
        data["approvals"] = [x for x in data.get("approvals", []) if x != a.pk] + [fresh.pk]
        fields = {"wait_until": fresh.expires_at, "wait_data": data}
    event_append(run=run, events=[NewEvent(EventType.APPROVAL_EXPIRED, {
        "approval": a.pk, "outcome": "rerequest", "new_approval": fresh.pk})], fields=fields)


def _expire_escalate(a: Approval, run: Run) -> None:
    a.escalated = True
    a.save(update_fields=["escalated"])
    event_append(run=run, events=[NewEvent(EventType.APPROVAL_EXPIRED, {
        "approval": a.pk, "outcome": "escalate"})])
    _block_if_stuck(run, f"nobody decided the approval for {a.tool} in time; an operator "
                         "must retry (asks again) or terminate", a)


_EXPIRY = {ExpiryOutcome.DENY: _expire_deny, ExpiryOutcome.CANCEL_RUN: _expire_cancel,
           ExpiryOutcome.REREQUEST: _expire_rerequest, ExpiryOutcome.ESCALATE: _expire_escalate}


def approvals_expire_due(*, limit: int = 100) -> list[int]:
    """Expire every pending approval past its deadline (the sweeper calls this)."""
    due = list(Approval.objects.filter(status=ApprovalStatus.PENDING, escalated=False,
                                       expires_at__lt=clock.now())
               .order_by("expires_at").values_list("pk", flat=True)[:limit])
    return [pk for pk in due if approval_expire(approval=Approval(pk=pk))]
