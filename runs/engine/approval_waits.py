"""The engine side of approvals: a decision or an expiry resolves the call and wakes the run.

Expiry follows ``Approval.expiry_outcome``: ``deny`` rejects the call (the model sees a
rejected result and goes on), ``cancel_run`` cancels the run, ``rerequest`` asks again with a
fresh deadline, ``escalate`` marks the approval escalated and keeps waiting. Each runs in one
transaction with the run row locked, so several sweepers at once expire an approval once.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import transaction

from agentops import clock
from approvals.models import Approval
from approvals.statuses import ApprovalStatus, ExpiryOutcome
from ledger.models import ToolCall
from ledger.statuses import ToolCallStatus as S
from runs.engine.calls import result_event
from runs.engine.events import NewEvent, event_append
from runs.engine.transition import run_transition
from runs.models import Run
from runs.statuses import RunStatus, WaitKind


def approvals_expire(*, limit: int = 100) -> list[int]:
    """Apply the expiry policy of every pending approval past its deadline; return their ids."""
    due = list(Approval.objects.filter(status=ApprovalStatus.PENDING, escalated=False,
                                       expires_at__lte=clock.now())
               .values_list("pk", "run_id")[:limit])
    done = []
    for approval_id, run_id in due:
        woken = False
        with transaction.atomic():
            run = Run.objects.select_for_update(skip_locked=True).filter(pk=run_id).first()
            approval = (Approval.objects.select_for_update(skip_locked=True)
                        .filter(pk=approval_id, status=ApprovalStatus.PENDING).first())
            if run is None or approval is None or approval.expires_at > clock.now():
                continue
            woken = _expire(run, approval)
        if woken:
            _enqueue(run_id)
        done.append(approval_id)
    return done


def approval_decide(*, approval: Approval, approve: bool, actor: str = "",
                    reason: str = "", args: dict[str, Any] | None = None) -> bool:
    """Record a person's decision on a pending approval and wake the run when nothing else waits.

    Returns True when the run was queued. Raises approvals.errors.AlreadyDecided when
    someone decided first.
    """
    from approvals.services import approval_lock

    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=approval.run_id)
        approval = approval_lock(approval.pk)
        status = ApprovalStatus.APPROVED if approve else ApprovalStatus.REJECTED
        Approval.objects.filter(pk=approval.pk).update(
            status=status, decided_at=clock.now(), reason=reason,
            approved_args=(args if args is not None else approval.proposed_args) if approve else None)
        call = ToolCall.objects.get(pk=approval.tool_call_id)
        if approve:
            ToolCall.objects.filter(pk=call.pk).update(status=S.PENDING, approved_args=args)
            events = [NewEvent("approval.decided", {"id": approval.pk, "decision": "approved",
                                                    "tool_call_id": call.tool_call_id},
                               actor=actor)]
        else:
            events = _rejected(call, approval, f"a person rejected it: {reason or 'no reason'}",
                               actor)
        woken = _resume(run, events, why="approval")
    if woken:
        _enqueue(run.pk)
    return woken


def _expire(run: Run, approval: Approval) -> bool:
    outcome = approval.expiry_outcome
    call = ToolCall.objects.get(pk=approval.tool_call_id)
    if outcome == ExpiryOutcome.ESCALATE:
        Approval.objects.filter(pk=approval.pk).update(escalated=True)
        event_append(run=run, events=[NewEvent("approval.escalated", {
            "id": approval.pk, "tool_call_id": call.tool_call_id})])
        return False
    Approval.objects.filter(pk=approval.pk).update(status=ApprovalStatus.EXPIRED,
                                                   decided_at=clock.now())
    if outcome == ExpiryOutcome.REREQUEST:
        return _rerequest(run, approval, call)
    if outcome == ExpiryOutcome.CANCEL_RUN:
        ToolCall.objects.filter(pk=call.pk).update(status=S.CANCELLED, finished_at=clock.now())
        detail = f"approval of {call.tool} expired; its policy cancels the run"
        run_transition(run, RunStatus.CANCELLED, reason="approval_expired", detail=detail,
                       events=[NewEvent("approval.expired", {"id": approval.pk,
                                                             "outcome": outcome}),
                               NewEvent("run.cancelled", {"reason": detail})],
                       fields={"cancel_requested": True}, expected_version=run.version)
        return False
    events = _rejected(call, approval, "nobody approved it in time (approval expired)", "")
    events.insert(0, NewEvent("approval.expired", {"id": approval.pk, "outcome": outcome}))
    return _resume(run, events, why="approval_expired")


def _rerequest(run: Run, old: Approval, call: ToolCall) -> bool:
    lifetime = (old.expires_at - old.created_at) if old.expires_at else dt.timedelta(hours=1)
    new = Approval.objects.create(
        run_id=old.run_id, tool_call_id=old.tool_call_id, tool=old.tool,
        proposed_args=old.proposed_args, risk=old.risk, why=old.why, state_seq=run.last_seq,
        plan_version=old.plan_version, expires_at=clock.now() + lifetime,
        expiry_outcome=old.expiry_outcome)
    fields = {}
    if run.status == RunStatus.WAITING and run.wait_kind == WaitKind.APPROVAL:
        data = dict(run.wait_data)
        data["approvals"] = [a for a in data.get("approvals", []) if a != old.pk] + [new.pk]
        fields = {"wait_until": new.expires_at, "wait_data": data}
    event_append(run=run, events=[NewEvent("approval.rerequested", {
        "id": old.pk, "new_id": new.pk, "tool_call_id": call.tool_call_id,
        "expires_at": new.expires_at.isoformat()})], fields=fields)
    return False


def _rejected(call: ToolCall, approval: Approval, message: str, actor: str) -> list[NewEvent]:
    ToolCall.objects.filter(pk=call.pk).update(status=S.REJECTED, finished_at=clock.now(),
                                               error_class="rejected", error=message[:500])
    return [
        NewEvent("approval.decided", {"id": approval.pk, "decision": "rejected",
                                      "tool_call_id": call.tool_call_id}, actor=actor),
        result_event(call.tool_call_id, status="rejected", error={
            "category": "rejected", "retryable": False, "message": message[:500],
            "next": "do not repeat this call; continue without it or choose another way"}),
    ]


def _resume(run: Run, events: list[NewEvent], *, why: str) -> bool:
    still = Approval.objects.filter(run_id=run.pk, status=ApprovalStatus.PENDING).exists()
    if run.status != RunStatus.WAITING or run.wait_kind != WaitKind.APPROVAL or still:
        event_append(run=run, events=events)
        return False
    run_transition(run, RunStatus.QUEUED, reason=why, expected_version=run.version,
                   events=[*events, NewEvent("wait.ended", {"kind": "approval", "why": why})])
    return True


def _enqueue(run_id: Any) -> None:
    from runs.services import run_enqueue

    run_enqueue(run_id)
