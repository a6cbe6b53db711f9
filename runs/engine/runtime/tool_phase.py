"""The tool phase of a step: which open calls run now, wait, or need a person.

Calls left ``running`` by a dead or paused worker are reconciled first (repeated when safe,
probed, or reported unknown); the runnable ones go to ``tool_call.execute``.
"""
from __future__ import annotations

from typing import Any

from agentops import clock
from approvals.records import approval_pending_for_run
from ledger.models import ToolCall
from ledger.services.execute import Outcome
from ledger.services.record import attempt_finish, toolcall_update
from ledger.statuses import ToolCallStatus as S
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.fencing import attempt_started, hard_deadline
from runs.engine.runtime.outcomes import go_unknown, wait
from runs.engine.runtime.session import RunSession
from runs.engine.runtime.tool_call import call_job, execute, record_settled
from runs.engine.runtime.tool_settle import settle
from runs.event_types import EventType

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
    _, ctx, args = call_job(session, call.step_key, call)
    started = attempt_started(call, n)
    ctx.fencing_token = session.run.version
    ctx.deadline = hard_deadline(spec, started)
    lost = Outcome("timed_out", category="worker_lost", message="worker lost mid-call",
                   retryable=True, ambiguous=True)
    call.opened_attempt = n
    st = settle(call, spec, ctx, args, lost, started, session.worker)
    record_settled(session, call.step_key, [st], [], False)


def _wait_approval(session: RunSession, calls: list[ToolCall]) -> None:
    pending = approval_pending_for_run(session.run.pk)
    until = min((a.expires_at for a in pending if a.expires_at), default=None)
    wait(session, kind="approval", until=until,
         data={"tool_calls": [c.tool_call_id for c in calls], "tools": [c.tool for c in calls],
               "approvals": [a.pk for a in pending]})
