"""The tool phase's hooks for durable waits, per-tool limits and results that arrive late.

Kept out of tool_call.py so a tool call reads as the happy path: tool_call calls
``parkable`` / ``parked_settlement`` / ``park_commit`` around execution, ``limits_gate``
before it, and ``late_results_record`` when its commit finds the run cancelled.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentops import clock
from agentops.tools import ToolContext, ToolResult, ToolSpec, WaitForSignal, WaitRequest
from ledger.models import ToolAttempt, ToolCall
from ledger.services.limits import limit_values, limits_admit
from ledger.services.record import toolcall_move, toolcall_update
from ledger.statuses import ToolCallStatus as S
from ledger.statuses import toolcall_can_move
from runs.engine.runtime.events import NewEvent, event_append
from runs.engine.runtime.outcomes import wait
from runs.engine.runtime.session import RunSession
from runs.engine.runtime.settlement import Settlement
from runs.engine.runtime.waits import (
    Parked,
    park_request,
    signal_available,
    signal_consume,
    signal_events,
)
from runs.event_types import EventType
from runs.models import Run
from runs.statuses import RunStatus


@dataclass
class ParkSettlement(Settlement):
    """A Settlement that parks the call (next="park") or consumes a waiting signal."""

    parked: Parked | None = None
    writes: list[Callable[[], Any]] = field(default_factory=list)


_PARKABLE: dict[int, tuple[ToolSpec, ToolSpec]] = {}  # id(spec) -> (spec, parkable spec)
_PARKABLE_MAX = 1024  # specs made on the fly (MCP servers) are not kept forever


def parkable(spec: ToolSpec) -> ToolSpec:
    """Return ``spec`` whose function turns a WaitRequest into a note on its context.

    Made once per spec, not per call: each ``dataclasses.replace`` of a spec costs about
    14 µs, 1% of a model step's CPU on a worker.
    """
    made = _PARKABLE.get(id(spec))
    if made is not None and made[0] is spec:
        return made[1]
    if len(_PARKABLE) >= _PARKABLE_MAX:
        _PARKABLE.clear()
    wrapped = _parkable(spec)
    _PARKABLE[id(spec)] = (spec, wrapped)
    return wrapped


def _parkable(spec: ToolSpec) -> ToolSpec:
    fn = spec.fn

    def call(ctx: ToolContext, **args: Any) -> Any:
        try:
            return fn(ctx, **args)
        except WaitRequest as req:
            ctx.parked = req  # type: ignore[attr-defined]
            return ToolResult(summary="parked")

    return dataclasses.replace(spec, fn=call)


def parked_settlement(session: RunSession, call: ToolCall, ctx: ToolContext) -> Settlement | None:
    """Return the settlement of a call whose tool asked to wait, or None for a normal call."""
    req = getattr(ctx, "parked", None)
    if req is None:
        return None
    if isinstance(req, WaitForSignal):
        sig = signal_available(session.run.pk, req.name)
        if sig is not None:
            facts = {"signal": sig.name, "payload": sig.payload}
            return ParkSettlement(call, S.SUCCEEDED, {"facts": facts, "finished_at": clock.now(),
                                                      "summary": f"signal {sig.name} received"},
                                  signal_events(call.tool_call_id, sig),
                                  writes=[signal_consume(sig)])
    return ParkSettlement(call, S.PENDING, {}, [], next="park",
                          parked=park_request(session.run, call, req,
                                              session.state["usage"]))


def park_commit(session: RunSession, st: ParkSettlement, events: list[NewEvent],
                also: list[Any]) -> None:
    """Commit the unit and park the run on ``st``'s wait."""
    p = st.parked
    wait(session, kind=p.kind, until=p.until, data=p.data, events=events,
         also=[*also, *p.writes])


def limits_gate(session: RunSession, step: str, calls: list[ToolCall]) -> bool:
    """Admit ``calls`` under their tools' concurrency/rate limits, or park on a short timer.

    Returns True when the calls may run now.
    """
    caps = {c.tool: limit_values(session.tool_limits, c.tool, session.agent.tool(c.tool))
            for c in calls}
    limited = [c for c in calls if caps[c.tool]]
    if not limited:
        return True
    retry_at = limits_admit(calls=limited, caps={c.tool: caps[c.tool] for c in limited},
                            team_id=session.run.team_id)
    if retry_at is None:
        return True
    tools = sorted({c.tool for c in limited})
    wait(session, kind="timer", until=retry_at,
         data={"reason": f"{', '.join(tools)} at its concurrency/rate limit", "step": step,
               "limited": tools})
    return False


def late_results_record(session: RunSession, settled: list[Settlement], new_rows: bool) -> None:
    """Record results that arrived after the run was cancelled; the run stays cancelled."""
    status = Run.objects.filter(pk=session.run.pk).values_list("status", flat=True).first()
    if status != RunStatus.CANCELLED:
        return
    events = []
    for st in settled:
        if getattr(st, "next", "") == "park":
            continue
        _late_row(st, new_rows)
        events.append(NewEvent(EventType.TOOL_LATE_RESULT, {
            "id": st.call.tool_call_id, "status": st.status,
            "facts": st.fields.get("facts"), "summary": st.fields.get("summary", ""),
            "error_class": st.fields.get("error_class", "")},
            tool_call_id=st.call.tool_call_id, attempt=st.attempt.attempt if st.attempt else None,
            key=f"late:{st.call.tool_call_id}:{st.attempt.attempt if st.attempt else 0}"))
    if events:
        event_append(run=session.run, events=events)


def _late_row(st: Settlement, new_rows: bool) -> None:
    fields = {k: v for k, v in st.fields.items() if k != "not_before"}
    if new_rows or not ToolCall.objects.filter(pk=st.call.pk).exists():
        toolcall_move(st.call, st.status, **fields)
        ToolCall.objects.bulk_create([st.call], ignore_conflicts=True)
        if st.call.pk is None:
            st.call = ToolCall.objects.get(tool_call_id=st.call.tool_call_id)
    else:
        current = ToolCall.objects.get(pk=st.call.pk)
        # A cancel marked a call in flight unknown; what its worker reports now replaces that
        # (a late timeout says no more than "unknown" already does).
        if toolcall_can_move(current.status, st.status):
            toolcall_update(current, st.status, **fields)()
    if st.attempt is not None:
        # The attempt opened before dispatch closes with what really happened.
        a = st.attempt
        closed = ToolAttempt.objects.filter(tool_call_id=st.call.pk, attempt=a.attempt).update(
            status=a.status, finished_at=a.finished_at, duration_ms=a.duration_ms,
            error_class=a.error_class, error=a.error)
        if not closed:
            a.tool_call = st.call
            ToolAttempt.objects.bulk_create([a], ignore_conflicts=True)

