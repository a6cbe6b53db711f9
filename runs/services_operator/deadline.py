"""Past its deadline: a waiting run is blocked for a person, or any run is terminated.

The engine stops a run it is working on at its next model or tool call once the deadline has
passed (``budget_exhausted``: blocked, budget_exhausted). What holds no worker is the
sweeper's (``deadlines_enforce``): a run waiting past its deadline is blocked the same way;
and where the deadline policy says ``terminate`` (``Run.on_deadline``, else
AGENTOPS_DEADLINE_POLICY), a run that is waiting, blocked or unknown past it is ended as the
operator's Roll back and terminate ends one: each standing write with a compensation is
undone (its own undo key), then the run is terminated, with one audit row whose actor is
the system. Writes nothing can undo stay done; the ended run lists them (runs/stands.py).
"""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from agentops import clock
from approvals.audit import audit_record
from approvals.consequences import Traits, consequence
from approvals.errors import ActionNotApplicable
from ledger.models import ToolCall
from ledger.services.record import toolcall_update
from ledger.statuses import DONE_OK
from ledger.statuses import ToolCallStatus as TC
from runs.engine.runtime.attention import attention_fields, block_reason
from runs.engine.runtime.budgets import deadline_policy
from runs.engine.runtime.calls import result_event
from runs.engine.runtime.snapshots import load_state
from runs.engine.runtime.transition import run_transition
from runs.models import Run
from runs.services_operator import rules
from runs.services_operator.resolve import run_terminate
from runs.services_operator.rollback import compensate_call, rollback_claim, tool_specs
from runs.statuses import WAIT_LABELS, RunStatus, WaitKind

SYSTEM = "system"
# Statuses in which no worker holds the run: the engine cannot notice its deadline.
NO_WORKER = (RunStatus.WAITING, RunStatus.BLOCKED, RunStatus.UNKNOWN)


def deadlines_enforce(*, limit: int = 100) -> list[Any]:
    """Block or terminate the runs holding no worker whose deadline passed; return their ids."""
    terminate = Q(on_deadline="terminate")
    if settings.AGENTOPS_DEADLINE_POLICY == "terminate":
        terminate |= Q(on_deadline="")
    due = list(Run.objects.filter(Q(status=RunStatus.WAITING) | terminate,
                                  deadline__lte=clock.now(), status__in=NO_WORKER)
               .values_list("pk", flat=True)[:limit])
    done = []
    for run_id in due:
        run = _stopped_at_deadline(run_id)
        if run is None:
            continue
        if deadline_policy(run) == "terminate":
            run_deadline_terminate(run=run)
        done.append(run_id)
    return done


def _stopped_at_deadline(run_id: Any) -> Run | None:
    """Lock the run; block it if it still waits past its deadline. Return it when due."""
    with transaction.atomic():
        # skip_locked: another sweeper, a waker or a person has it right now; next sweep.
        run = Run.objects.select_for_update(skip_locked=True).filter(pk=run_id).first()
        if (run is None or run.status not in NO_WORKER or run.deadline is None
                or run.deadline > clock.now() or rules.rollback_refusal(run)):
            return None
        if run.status == RunStatus.WAITING:
            _block_waiting(run)
        elif deadline_policy(run) != "terminate":
            return None
    return run


def _block_waiting(run: Run) -> None:
    what = WAIT_LABELS.get(run.wait_kind, run.wait_kind or "something")
    then = ("the deadline policy terminates it" if deadline_policy(run) == "terminate"
            else "raise its budget (seconds) to give it more time, or terminate it")
    detail = (f"budget exhausted: deadline {run.deadline.isoformat(timespec='seconds')} "
              f"passed while it waited for {what}; {then}")
    fields = attention_fields(run=run, category="budget", detail=detail,
                              state=load_state(run))
    events, also = _parked_call_failed(run, what)
    run_transition(run, RunStatus.BLOCKED, reason=block_reason("budget"), detail=detail,
                   actor=SYSTEM, fields=fields, events=events, also=also)


def _parked_call_failed(run: Run, what: str) -> tuple[list[Any], list[Any]]:
    """Fail the call that parked a signal or children wait, as the wait's own timeout does.

    The tick after Raise budget then reads the failure (and may ask again) instead of
    running the parked call a second time; an approval wait keeps its pending approval.
    """
    if run.wait_kind not in (WaitKind.SIGNAL, WaitKind.CHILDREN):
        return [], []
    call = ToolCall.objects.filter(tool_call_id=run.wait_data.get("tool_call_id", "")).first()
    if call is None:
        return [], []
    error = {"category": "deadline", "retryable": False,
             "message": f"the run's deadline passed while this call waited for {what}",
             "next": "a person gives the run more time (then ask again) or ends it"}
    return ([result_event(call.tool_call_id, status="failed", error=error)],
            [toolcall_update(call, TC.FAILED, error_class="deadline", finished_at=clock.now(),
                             not_before=None)])


def run_deadline_terminate(*, run: Run) -> dict[str, Any]:
    """Undo what a compensation can undo, then terminate ``run``, audited as the system."""
    reason = (f"its deadline {run.deadline.isoformat(timespec='seconds')} passed and its "
              "deadline policy is terminate")
    specs = tool_specs(run)
    writes = list(ToolCall.objects.filter(run=run, effect="write", status__in=list(DONE_OK))
                  .order_by("-id"))
    rollback_claim(run, SYSTEM)
    try:
        undone, failed = _compensate_all(run, writes, specs)
    finally:
        Run.objects.filter(pk=run.pk, lease_owner=rules.ROLLBACK_OWNER + SYSTEM).update(
            lease_owner="", lease_expires_at=None)
    run.refresh_from_db()
    ended = run_terminate(run=run, actor=SYSTEM, reason=reason)
    lines = [_line(c, undone) for c in writes]
    changes = {**ended, "compensated": sorted(undone), "compensation_failed": failed,
               "calls": lines}
    audit_record(actor=None, action="run.deadline_terminate", reason=reason, run=run,
                 data=changes)
    return changes


def _compensate_all(run: Run, writes: list[ToolCall],
                    specs: dict[str, Any]) -> tuple[set[str], dict[str, str]]:
    """Compensate each reversible write, newest first; a failure is kept and the rest go on."""
    undone: set[str] = set()
    failed: dict[str, str] = {}
    for call in writes:
        spec = specs.get(call.tool)
        if call.reversibility != "reversible" or spec is None or spec.compensate is None:
            continue
        try:
            compensate_call(run, call, spec, SYSTEM)
            undone.add(call.tool_call_id)
        except ActionNotApplicable as exc:
            failed[call.tool_call_id] = exc.message[:300]
    return undone, failed


def _line(call: ToolCall, undone: set[str]) -> dict[str, Any]:
    """Return what the terminate did to one standing write, in the consequence model's words."""
    traits = Traits(call.tool, write=True, keyed=call.idempotent, probeable=call.probeable,
                    compensable=call.reversibility == "reversible")
    verb = "rollback_terminate" if call.tool_call_id in undone else "terminate"
    what = consequence(verb, "done", traits)
    return {"tool_call_id": call.tool_call_id, "tool": call.tool, "kind": traits.kind,
            "will": what.will, "undone": what.undone, "stands": what.stands}
