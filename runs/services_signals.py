"""Run services for the outside world and for alternatives: signals and forks.

``run_signal`` keeps every signal (unique by key, so a redelivery is a no-op) and wakes the
run if it waits for it; a signal that arrives before the wait is consumed when the wait
starts. ``run_fork`` starts a new run from any event of another: the log up to that event is
copied (so the fork replays like any run), its ledger is not, and calls that were open at the
fork point are closed as "not carried over" so the model plans them again.
"""
from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from agentops.errors import Conflict, InvalidInput
from agentops.jsonstate import check_json
from agentops.causes import SIGNAL, event_cause
from runs.engine.runtime.events import NewEvent, event_append
from runs.engine.runtime.queue import run_enqueue
from runs.engine.runtime.session import state_projection
from runs.engine.runtime.snapshots import load_state, snapshot_build
from runs.engine.runtime.waits import signal_deliver
from runs.errors import RunError
from runs.event_archive import archived_events_restore
from runs.event_types import EventType
from runs.models import Event, Run, Signal, Step
from runs.models.event import run_events
from runs.statuses import TERMINAL, RunStatus, StepStatus

_COPIED_BUDGET = ("budget_tokens", "budget_model_calls", "budget_tool_calls",
                  "budget_cost_micros", "recovery_limit")


class SignalConflict(Conflict, RunError):
    """The signal key was used before for another run or another signal."""

    code = "signal_conflict"


def run_signal(*, run: Run, name: str, payload: dict[str, Any] | None, key: str) -> Signal:
    """Deliver signal ``name`` to ``run``; the same ``key`` again returns the first delivery."""
    payload = payload or {}
    if not name or not key:
        raise InvalidInput("a signal needs a name and an idempotency key")
    check_json(payload, "$payload")
    try:
        with transaction.atomic():
            sig = Signal.objects.create(run=run, name=name, payload=payload, key=key)
    except IntegrityError:
        sig = Signal.objects.get(key=key)
        if sig.run_id != run.pk or sig.name != name:
            raise SignalConflict("this signal key was already used for a different signal",
                                 run_id=str(sig.run_id), name=sig.name) from None
        return sig
    if run.status in TERMINAL:
        Signal.objects.filter(pk=sig.pk).delete()
        raise SignalConflict(f"the run is {run.status}; it takes no more signals",
                             status=run.status)
    with event_cause(f"{SIGNAL}:{name}"):
        signal_deliver(run.pk)
    return sig


def run_fork(*, run: Run, seq: int, actor: Any = None, version: str | None = None) -> Run:
    """Start a new queued run from ``run``'s state after event ``seq``; return it.

    ``version`` pins the fork to another deployed version of the agent (default: the same).
    """
    if not 1 <= seq <= run.last_seq:
        raise InvalidInput(f"seq must be between 1 and {run.last_seq}", seq=seq)
    state = load_state(run, upto_seq=seq)
    with transaction.atomic():
        fork = Run.objects.create(
            agent_name=run.agent_name, agent_version=version or run.agent_version, goal=run.goal,
            input=run.input, forked_from=run, forked_at_seq=seq, parent=None, team=run.team,
            created_by=actor if getattr(actor, "pk", None) else None, last_seq=seq,
            **{f: getattr(run, f) for f in _COPIED_BUDGET},
        )
        _copy_log(run, fork, seq)
        _copy_steps(fork, state)
        event_append(run=fork, events=_fork_events(run, seq, state, actor),
                     fields=state_projection(state))
        fork_state = load_state(fork)
        snapshot_build(run_id=fork.pk, state=fork_state, phase="forked",
                       agent_version=fork.agent_version).save()

        run_enqueue(fork.pk)
    fork.refresh_from_db()
    return fork


def _copy_log(src: Run, dst: Run, seq: int) -> None:
    archived_events_restore(src.pk)  # an archived source's log is read back first
    # Keys are global (one fact, one row): the copies drop them; the source keeps the facts.
    rows = [Event(run=dst, seq=e.seq, type=e.type, data=e.data, tool_call_id=e.tool_call_id,
                  attempt=e.attempt, key=None, schema_version=e.schema_version, actor=e.actor,
                  caused_by=e.caused_by, at=e.at)
            for e in run_events(src).filter(seq__lte=seq).order_by("seq").iterator()]
    Event.objects.bulk_create(rows, batch_size=500)


def _copy_steps(fork: Run, state: dict[str, Any]) -> None:
    Step.objects.bulk_create([
        Step(run=fork, key=s["key"], position=i, title=s["title"], depends_on=s["depends_on"],
             input=s["input"], status=_step_status(state, s["key"]))
        for i, s in enumerate(state["plan"])
    ])


def _step_status(state: dict[str, Any], key: str) -> str:
    status = state["steps"].get(key, {}).get("status", StepStatus.PENDING)
    return status if status in StepStatus.values else StepStatus.PENDING


def _fork_events(src: Run, seq: int, state: dict[str, Any], actor: Any) -> list[NewEvent]:
    who = getattr(actor, "get_username", lambda: str(actor or ""))()
    events = [NewEvent(EventType.RUN_FORKED, {"from": str(src.pk), "seq": seq}, actor=who)]
    for call_id, call in state["open_calls"].items():
        events.append(NewEvent(EventType.TOOL_RESULT, {"id": call_id, "status": "failed", "error": {
            "category": "forked", "retryable": True,
            "message": f"{call['name']} was still open when this run was forked from event "
                       f"#{seq}; it was not carried over and may not have run",
            "next": "call it again if it is still needed"}}, tool_call_id=call_id))
    events.append(NewEvent(EventType.RUN_STATUS, {"from": state["status"], "to": RunStatus.QUEUED,
                                          "reason": "forked", "detail": f"{src.pk}@{seq}"}))
    return events


