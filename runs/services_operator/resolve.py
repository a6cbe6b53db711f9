"""Resolve a stopped run: retry its step, skip it, confirm an unknown call, or terminate."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction

from agentops import clock
from agentops.agents import registry
from agentops.errors import InvalidInput
from agentops.jsonstate import check_json
from approvals.errors import ActionNotApplicable
from approvals.models import Approval
from approvals.records import approval_build, approvals_insert
from approvals.statuses import ApprovalStatus
from ledger.models import ToolAttempt, ToolCall
from ledger.services.record import toolcall_update
from ledger.statuses import ToolCallStatus as TC
from runs.engine.runtime.calls import result_event
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.snapshots import load_state
from runs.event_types import EventType
from runs.models import Run
from runs.services import run_cancel
from runs.services_operator import rules
from runs.services_operator.common import actor_name, requeue, run_locked
from runs.statuses import TERMINAL, RunStatus, StepStatus

_CANCELLABLE = (TC.PENDING, TC.FAILED, TC.TIMED_OUT, TC.AWAITING_APPROVAL,
                TC.CONFIRMED_NOT_EXECUTED)


def run_retry(*, run: Run, actor: Any, reason: str = "") -> dict[str, Any]:
    """Restart the blocked step with a fresh retry budget; re-open the call that failed."""
    who = actor_name(actor)
    with run_locked(run, rules.RETRY, "retry") as state:
        step = state["current_step"]
        events: list[NewEvent] = []
        also: list[Callable[[], Any]] = []
        changes: dict[str, Any] = {"step": step, "reopened": [], "closed": [],
                                   "approvals_requested": []}
        if step:
            events.append(NewEvent(EventType.STEP_RESET, {"step": step, "by": who, "reason": reason},
                                   actor=who))
            _reopen_failed(run, state, events, also, changes)
            changes["closed"] = close_open_calls(run, state, step, events, also,
                                            "not run: the operator retried the step")
            changes["approvals_requested"] = _rerequest_approvals(run, state, step, also)
        requeue(run, state, events, reason="operator_retry", actor=who, detail=reason, also=also)
    return changes


def _reopen_failed(run: Run, state: dict[str, Any], events: list[NewEvent],
                   also: list[Callable[[], Any]], changes: dict[str, Any]) -> None:
    call = ToolCall.objects.filter(run=run, tool_call_id=run.current_tool_call).first()
    if call is None or call.status not in (TC.FAILED, TC.TIMED_OUT):
        return
    if call.tool_call_id not in state["open_calls"]:
        events.append(NewEvent(EventType.TOOL_REOPENED, {"id": call.tool_call_id, "step": call.step_key,
                                                 "turn": call.turn, "name": call.tool},
                               tool_call_id=call.tool_call_id))
    # A fresh retry budget for the tool: attempts count again from here.
    also.append(toolcall_update(call, TC.PENDING, not_before=None, error_class="", error="",
                                finished_at=None, retry_base=call.attempts))
    changes["reopened"].append(call.tool_call_id)


def close_open_calls(run: Run, state: dict[str, Any], step: str, events: list[NewEvent],
                also: list[Callable[[], Any]], message: str,
                cancel_rows: bool = False) -> list[str]:
    """Close the step's open calls that will not run (no ledger row, or cancelled rows)."""
    open_ids = [cid for cid, c in state["open_calls"].items() if c["step"] == step]
    rows = {c.tool_call_id: c for c in ToolCall.objects.filter(tool_call_id__in=open_ids)}
    closed = []
    for cid in open_ids:
        row = rows.get(cid)
        if row is not None and not (cancel_rows and row.status in _CANCELLABLE):
            continue
        if row is not None:
            also.append(toolcall_update(row, TC.CANCELLED, finished_at=clock.now()))
        events.append(result_event(cid, status="cancelled", error={
            "category": "not_run", "retryable": True, "message": message,
            "next": "ask for it again if it is still needed"}))
        closed.append(cid)
    return closed


def _rerequest_approvals(run: Run, state: dict[str, Any], step: str,
                         also: list[Callable[[], Any]]) -> list[str]:
    waiting = ToolCall.objects.filter(run=run, step_key=step, status=TC.AWAITING_APPROVAL)
    waiting = waiting.exclude(approvals__status=ApprovalStatus.PENDING)
    rows: list[Approval] = []
    agent = registry.get(run.agent_name, run.agent_version) if waiting else None
    for call in waiting:
        spec = agent.tool(call.tool)
        if spec is not None:
            rows.append(approval_build(run=run, call=call, spec=spec, state=state,
                                       why=f"asked again after a retry: {call.tool}"))
    if rows:
        also.append(approvals_insert(rows))
    return [r.tool_call.tool_call_id for r in rows]


def run_skip(*, run: Run, actor: Any, reason: str = "", output: dict[str, Any] | None = None,
             step: str | None = None) -> dict[str, Any]:
    """Mark the blocked step skipped (with operator-provided facts, if any) and continue."""
    who = actor_name(actor)
    facts = (output or {}).get("facts", output or {}) if isinstance(output, dict) else None
    if output is not None and not isinstance(facts, dict):
        raise InvalidInput("output must be a JSON object of facts")
    check_json(facts or {}, "$output")
    with run_locked(run, rules.SKIP, "skip") as state:
        step = step or state["current_step"] or _first_unfinished(state)
        if not step or step not in state["steps"] or step == "_plan":
            raise ActionNotApplicable("there is no plan step to skip here; retry or terminate")
        if state["steps"][step]["status"] in (StepStatus.SUCCEEDED, StepStatus.SKIPPED):
            raise ActionNotApplicable(f"step {step} is already {state['steps'][step]['status']}")
        events: list[NewEvent] = []
        also: list[Callable[[], Any]] = []
        closed = close_open_calls(run, state, step, events, also, "not run: the step was skipped",
                             cancel_rows=True)
        events.append(NewEvent(EventType.STEP_SKIPPED, {"step": step, "by": who, "reason": reason,
                                                "output": {
            "text": f"skipped by {who}: {reason}"[:4000], "facts": facts or {}}}, actor=who))
        requeue(run, state, events, reason="operator_skip", actor=who, detail=reason, also=also)
    return {"step": step, "facts": facts or {}, "cancelled_calls": closed}


def _first_unfinished(state: dict[str, Any]) -> str | None:
    for plan_step in state["plan"]:
        if state["steps"][plan_step["key"]]["status"] not in ("succeeded", "skipped"):
            return plan_step["key"]
    return None


def run_confirm(*, run: Run, actor: Any, executed: bool, tool_call: ToolCall | str | None = None,
                facts: dict[str, Any] | None = None, evidence: str = "",
                reason: str = "") -> dict[str, Any]:
    """Record whether an ``unknown`` call happened; executed continues, not executed re-runs it."""
    who = actor_name(actor)
    check_json(facts or {}, "$facts")
    verb = "confirm executed" if executed else "confirm not executed"
    with run_locked(run, rules.CONFIRM, verb):
        call = _unknown_call(run, tool_call)
        said = {"id": call.tool_call_id, "executed": executed, "evidence": evidence[:4000],
                "by": who, "tool": call.tool, **({"facts": facts} if facts else {})}
        events = [NewEvent(EventType.TOOL_CONFIRMED, said, tool_call_id=call.tool_call_id, actor=who)]
        if executed:
            summary = f"confirmed executed by {who}" + (f": {evidence}" if evidence else "")
            also = [toolcall_update(call, TC.CONFIRMED_EXECUTED, facts=facts or {},
                                    summary=summary[:2000], error_class="", error="",
                                    finished_at=clock.now())]
            events.append(result_event(call.tool_call_id, status="confirmed_executed",
                                       facts=facts or {}, summary=summary[:2000]))
        else:
            also = [toolcall_update(call, TC.CONFIRMED_NOT_EXECUTED, not_before=None)]
        also.append(_attempt_confirmed(call, TC.CONFIRMED_EXECUTED if executed
                                       else TC.CONFIRMED_NOT_EXECUTED))
        state = load_state(run)
        requeue(run, state, events, reason="operator_confirm", actor=who, detail=reason,
                also=also)
    return {"tool_call": call.tool_call_id, "tool": call.tool, "executed": executed,
            "facts": facts or {}, "evidence": evidence[:4000]}


def _attempt_confirmed(call: ToolCall, status: str) -> Callable[[], Any]:
    """Return the writer closing the call's last attempt with the outcome a person confirmed."""
    def write() -> None:
        last = ToolAttempt.objects.filter(tool_call=call).order_by("-attempt").first()
        if last is not None:
            ToolAttempt.objects.filter(pk=last.pk).update(
                status=status, finished_at=last.finished_at or clock.now())

    return write


def _unknown_call(run: Run, tool_call: ToolCall | str | None) -> ToolCall:
    call_id = getattr(tool_call, "tool_call_id", tool_call) or run.current_tool_call
    call = ToolCall.objects.filter(run=run, tool_call_id=call_id).first()
    if call is None:
        raise ActionNotApplicable(f"this run has no tool call {call_id or '(none named)'}")
    if call.status != TC.UNKNOWN:
        raise ActionNotApplicable(f"{call.tool} ({call.tool_call_id}) is {call.status}, not "
                                  "unknown; there is nothing to confirm")
    return call


def run_terminate(*, run: Run, actor: Any, reason: str) -> dict[str, Any]:
    """Cancel the run with ``reason``: its approvals go stale, its child runs are cancelled."""
    refusal = rules.status_refusal(run, rules.LIVE, "terminate")
    if refusal:
        raise ActionNotApplicable(refusal, status=run.status)
    with transaction.atomic():
        src = run.status
        pending = set(Approval.objects.filter(run=run, status="pending")
                      .values_list("pk", flat=True))
        children = list(Run.objects.filter(parent=run).exclude(status__in=list(TERMINAL))
                        .values_list("pk", flat=True))
        run_cancel(run=run, actor=actor, reason=reason)
    return {"from": src, "to": RunStatus.CANCELLED, "stale_approvals": sorted(pending),
            "cancelled_children": [str(c) for c in children]}
