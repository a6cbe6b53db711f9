"""Durable waits: timers, external signals and child runs, parked and woken without a worker.

A tool parks its call by raising ``WaitForSignal`` or ``WaitForChildren`` (agentops.tools):
the call stays ``pending`` in the ledger and the run goes ``waiting``. Whoever ends the wait
(a signal delivery, the sweeper on a due timer or finished children) resolves the call with a
``tool.result`` and moves the run to ``queued`` in one transaction, so the woken tick reloads
the latest state and never re-runs the parking tool. Every waker locks the run row and
re-checks it is still waiting for the same thing, so several sweepers at once are harmless.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from agentops import clock
from agentops.tools import WaitForChildren, WaitForSignal, WaitRequest
from ledger.models import ToolCall
from ledger.services.record import toolcall_update
from ledger.statuses import ToolCallStatus as S
from runs.engine.runtime.budgets import child_shares, children_spent
from runs.engine.runtime.calls import result_event
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.queue import run_enqueue
from runs.engine.runtime.start import run_start
from runs.engine.runtime.transition import run_transition
from runs.engine.runtime.world import waited_s
from runs.event_types import EventType
from runs.models import Run, Signal
from runs.statuses import ATTENTION, COMPLETED, TERMINAL, RunStatus, WaitKind

Writer = Callable[[], Any]


@dataclass
class Parked:
    """A tool call that asked to wait: what for, until when, and what to write with the wait."""

    call: ToolCall
    kind: str
    until: dt.datetime | None
    data: dict[str, Any]
    writes: list[Writer]


def park_request(run: Run, call: ToolCall, req: WaitRequest, usage: dict[str, Any]) -> Parked:
    """Return how ``call`` waits for ``req`` (children are created with the wait, atomically).

    Child runs each get a share of what the run may still spend after ``usage``.
    """
    until = clock.now() + dt.timedelta(seconds=req.timeout_s) if req.timeout_s else None
    base = {"tool_call_id": call.tool_call_id, "step": call.step_key, "tool": call.tool}
    if isinstance(req, WaitForSignal):
        return Parked(call, WaitKind.SIGNAL, until, {**base, "name": req.name}, [])
    if isinstance(req, WaitForChildren):
        weights = [c.get("weight", 1) if req.split == "weights" else 1 for c in req.children]
        shares = child_shares(run, usage, weights)
        data = {**base, "count": len(req.children), "split": req.split, "shares": shares}
        return Parked(call, WaitKind.CHILDREN, until, data,
                      [lambda: _spawn(run, call, req.children, shares)])
    raise TypeError(f"unknown wait request {type(req).__name__}")


def signal_available(run_id: Any, name: str) -> Signal | None:
    """Return the oldest signal ``name`` sent to the run and not consumed yet."""
    return (Signal.objects.filter(run_id=run_id, name=name, consumed_seq__isnull=True)
            .order_by("received_at", "id").first())


def signal_events(call_id: str, sig: Signal) -> list[NewEvent]:
    """Return the events that consume ``sig`` as the result of call ``call_id``."""
    return [
        NewEvent(EventType.SIGNAL_RECEIVED, {"name": sig.name, "payload": sig.payload},
                 key=f"signal:{sig.key}"),
        result_event(call_id, status="succeeded",
                     facts={"signal": sig.name, "payload": sig.payload},
                     summary=f"signal {sig.name} received"),
    ]


def signal_consume(sig: Signal) -> Writer:
    """Return the writer marking ``sig`` consumed at the seq of the commit that consumes it."""

    def write() -> None:
        seq = Run.objects.filter(pk=sig.run_id).values_list("last_seq", flat=True).first()
        Signal.objects.filter(pk=sig.pk, consumed_seq__isnull=True).update(consumed_seq=seq)

    return write


def signal_deliver(run_id: Any) -> bool:
    """Wake the run if it waits for a signal that has arrived; return True when woken."""
    with transaction.atomic():
        run = _lock_waiting(run_id, WaitKind.SIGNAL)
        if run is None:
            return False
        sig = signal_available(run.pk, run.wait_data.get("name", ""))
        if sig is None:
            return False
        call = ToolCall.objects.get(tool_call_id=run.wait_data["tool_call_id"])
        facts = {"signal": sig.name, "payload": sig.payload}
        _wake(run, signal_events(call.tool_call_id, sig),
              [signal_consume(sig), _call_succeeded(call, facts, f"signal {sig.name} received")],
              why="signal")
    _enqueue(run_id)
    return True


def signals_wake(*, limit: int = 100) -> list[Any]:
    """Wake every run waiting for a signal that is already there (a delivery raced the wait)."""
    pending = set(Signal.objects.filter(consumed_seq__isnull=True,
                                        run__status=RunStatus.WAITING,
                                        run__wait_kind=WaitKind.SIGNAL)
                  .values_list("run_id", flat=True)[:limit])
    return [run_id for run_id in pending if signal_deliver(run_id)]


def timers_wake(*, limit: int = 100) -> list[Any]:
    """Queue runs whose timer (backoff, limit wait) is due; return their ids."""
    due = list(Run.objects.filter(status=RunStatus.WAITING, wait_kind=WaitKind.TIMER,
                                  wait_until__lte=clock.now())
               .values_list("pk", flat=True)[:limit])
    woken = []
    for run_id in due:
        with transaction.atomic():
            run = _lock_waiting(run_id, WaitKind.TIMER)
            if run is None or run.wait_until is None or run.wait_until > clock.now():
                continue
            _wake(run, [], [], why="timer")
        _enqueue(run_id)
        woken.append(run_id)
    return woken


def waits_time_out(*, limit: int = 100) -> list[Any]:
    """Fail the parked call of signal/children waits past their deadline; queue the runs."""
    due = list(Run.objects.filter(status=RunStatus.WAITING,
                                  wait_kind__in=[WaitKind.SIGNAL, WaitKind.CHILDREN],
                                  wait_until__lte=clock.now())
               .values_list("pk", flat=True)[:limit])
    woken = []
    for run_id in due:
        with transaction.atomic():
            run = Run.objects.select_for_update(skip_locked=True).filter(pk=run_id).first()
            if (run is None or run.status != RunStatus.WAITING or run.wait_until is None
                    or run.wait_until > clock.now()):
                continue
            call = ToolCall.objects.filter(
                tool_call_id=run.wait_data.get("tool_call_id", "")).first()
            what = run.wait_data.get("name") or "child runs"
            error = {"category": "wait_timeout", "retryable": True,
                     "message": f"waited for {what} until {run.wait_until.isoformat()}; "
                                "it did not arrive", "next": "wait again or go on without it"}
            if call is None:  # a wait no tool call parked: just wake the run
                _wake(run, [], [], why="timeout")
            else:
                _wake(run, [result_event(call.tool_call_id, status="failed", error=error)],
                      [_call_failed(call, "wait_timeout")], why="timeout")
        _enqueue(run_id)
        woken.append(run_id)
    return woken


def children_wake(*, limit: int = 100) -> list[Any]:
    """Resolve fan-out waits whose child runs have all ended; queue the parents."""
    waiting = list(Run.objects.filter(status=RunStatus.WAITING, wait_kind=WaitKind.CHILDREN)
                   .values_list("pk", "wait_data")[:limit])
    woken = []
    for run_id, data in waiting:
        if not data.get("tool_call_id"):
            continue  # not a fan-out this engine started; the run's own timeout handles it
        kids = _children(data["tool_call_id"])
        if len(kids) < data.get("count", 0) or any(k["status"] not in TERMINAL for k in kids):
            continue
        with transaction.atomic():
            run = _lock_waiting(run_id, WaitKind.CHILDREN)
            if run is None:
                continue
            _children_done(run, kids)
        _enqueue(run_id)
        woken.append(run_id)
    return woken


def _children_done(run: Run, kids: list[dict[str, Any]]) -> None:
    """Resolve the fan-out call with its children's outcomes; charge the parent what they spent."""
    call = ToolCall.objects.get(tool_call_id=run.wait_data["tool_call_id"])
    spent = children_spent(list(Run.objects.filter(pk__in=[k["id"] for k in kids])),
                           run.wait_data.get("shares", []))
    facts = {"children": kids, "succeeded": sum(k["status"] == "succeeded" for k in kids),
             # A child that completed with exceptions did not do all its work.
             "with_exceptions": sum(k["status"] == RunStatus.COMPLETED_WITH_EXCEPTIONS
                                    for k in kids),
             "failed": sum(k["status"] not in COMPLETED for k in kids), "budget": spent}
    summary = (f"{facts['succeeded']} of {len(kids)} child runs succeeded"
               + (f", {facts['with_exceptions']} completed with exceptions"
                  if facts["with_exceptions"] else ""))
    events = [result_event(call.tool_call_id, status="succeeded", facts=facts, summary=summary),
              NewEvent(EventType.CHILDREN_SPENT, {"tool_call_id": call.tool_call_id, **spent},
                       tool_call_id=call.tool_call_id)]
    trouble = _children_trouble(kids)
    if trouble:
        events.append(NewEvent(EventType.CHILDREN_ENDED, {
            "tool_call_id": call.tool_call_id, "children": trouble},
            tool_call_id=call.tool_call_id))
    used = spent["usage"]
    # The projection of the state's usage, which the children.spent event raises alike.
    fields = {"tokens_used": run.tokens_used + used["tokens"],
              "model_calls": run.model_calls + used["model_calls"],
              "tool_calls": run.tool_calls + used["tool_calls"],
              "cost_micros": run.cost_micros + used["cost_micros"]}
    _wake(run, events, [_call_succeeded(call, facts, summary)], why="children", fields=fields)


def _children(call_id: str) -> list[dict[str, Any]]:
    rows = Run.objects.filter(idempotency_key__startswith=f"{call_id}:child:").values(
        "id", "status", "agent_name", "attention_reason", "idempotency_key")
    out = []
    for r in sorted(rows, key=lambda r: int(r["idempotency_key"].rsplit(":", 1)[1])):
        item = {"id": str(r["id"]), "agent": r["agent_name"], "status": r["status"]}
        if r["status"] in ATTENTION:
            item["attention_reason"] = r["attention_reason"]
        out.append(item)
    return out


def _children_trouble(kids: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the children that did not do all their work, each with what it left undone."""
    ids = [k["id"] for k in kids if k["status"] != RunStatus.SUCCEEDED]
    if not ids:
        return []
    rows = {str(r["id"]): r for r in Run.objects.filter(pk__in=ids).values(
        "id", "status", "agent_name", "exceptions", "attention_detail")}
    out = []
    for kid in ids:
        row = rows[kid]
        what = [str(e.get("what") or e.get("kind", "")) for e in row["exceptions"] or []]
        if not what and row["status"] not in COMPLETED:
            what = [row["attention_detail"] or f"it ended {row['status']}; its work was not done"]
        out.append({"id": kid, "agent": row["agent_name"], "status": row["status"],
                    "what": [w[:300] for w in what[:10]]})
    return out


def _spawn(run: Run, call: ToolCall, children: list[dict[str, Any]],
           shares: list[dict[str, Any]]) -> list[str]:
    ids = []
    for i, (child, share) in enumerate(zip(children, shares)):
        # Keyed by the parking call and position: a re-run of the tool finds the same
        # children, so a finished sibling is never started again.
        kid = run_start(agent=child["agent"], goal=child["goal"], input=child.get("input"),
                        parent=run, idempotency_key=f"{call.tool_call_id}:child:{i}",
                        share=share)
        ids.append(str(kid.pk))
    return ids


def _call_failed(call: ToolCall, category: str) -> Writer:
    return toolcall_update(call, S.FAILED, error_class=category, finished_at=clock.now(),
                           not_before=None)


def _call_succeeded(call: ToolCall, facts: dict[str, Any], summary: str) -> Writer:
    return toolcall_update(call, S.SUCCEEDED, facts=facts, summary=summary,
                           finished_at=clock.now(), not_before=None)


def _lock_waiting(run_id: Any, kind: str) -> Run | None:
    # skip_locked: another sweeper (or a delivery) is waking this run right now.
    run = Run.objects.select_for_update(skip_locked=True).filter(pk=run_id).first()
    if run is None or run.status != RunStatus.WAITING or run.wait_kind != kind:
        return None
    return run


def _wake(run: Run, events: list[NewEvent], writes: list[Writer], *, why: str,
          fields: dict[str, Any] | None = None) -> None:
    ended = NewEvent(EventType.WAIT_ENDED, {"kind": run.wait_kind, "why": why,
                                            "waited_s": waited_s(run)})
    run_transition(run, RunStatus.QUEUED, reason=f"wait_{why}", events=[*events, ended],
                   expected_version=run.version, also=writes, fields=fields)


def _enqueue(run_id: Any) -> None:
    run_enqueue(run_id)
