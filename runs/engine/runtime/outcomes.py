"""How a unit ends when it cannot simply go on: block, retry later, wait, or go unknown."""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings

from agentops import clock
from runs.engine.core import reducer
from runs.engine.core.policy import backoff_delay
from runs.engine.runtime import telemetry
from runs.engine.runtime.budgets import failures_spent
from runs.engine.runtime.attention import attention_fields, block_reason, wait_fields
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.session import RunSession
from runs.engine.runtime.transition import run_transition
from runs.event_types import EventType
from runs.models import Run
from runs.statuses import UNKNOWN_OUTCOME, RunStatus


def block(session: RunSession, category: str, detail: str, *,
          events: Sequence[NewEvent] = (), tool: str = "", tool_call_id: str = "",
          also: Sequence[Callable[[], Any]] = ()) -> None:
    """Stop the run as ``blocked`` for ``category`` with the evidence in ``detail``."""
    fields = attention_fields(run=session.run, category=category, detail=detail,
                              state=session.state, tool=tool, tool_call_id=tool_call_id)
    step = session.state["current_step"]
    evs = list(events)
    if step:
        evs.append(NewEvent(EventType.STEP_FAILED, {"step": step, "status": "blocked",
                                            "error_class": category}))
    session.commit(evs, to=RunStatus.BLOCKED, reason=block_reason(category), detail=detail,
                   fields=fields, also=also)
    telemetry.run_stopped(session.agent.name, RunStatus.BLOCKED, category, detail)


def block_unopened(run: Run, category: str, detail: str, *,
                   state: dict[str, Any] | None = None) -> None:
    """Block a claimed run that has no session (its state or agent could not be opened)."""
    # Without a loadable state (an unknown schema) progress comes from the run's projection.
    fields = attention_fields(run=run, category=category, detail=detail,
                              state=state or reducer.empty_state())
    run_transition(run, RunStatus.BLOCKED, reason=block_reason(category), detail=detail,
                   fields=fields, expected_version=run.version)


def go_unknown(session: RunSession, *, tool: str, tool_call_id: str, detail: str,
               events: Sequence[NewEvent] = (), also: Sequence[Callable[[], Any]] = ()) -> None:
    """Stop the run as ``unknown``: a write's outcome needs a person to confirm.

    The evidence for the recommendation comes from this unit's ``tool.unknown`` event and
    the attempt just closed, which are committed together with the status.
    """
    evidence: dict[str, Any] = {}
    for e in events:
        if e.type == EventType.TOOL_UNKNOWN and e.data.get("id") == tool_call_id:
            evidence.update(cause=e.data.get("category", ""), probe=e.data.get("probe", ""),
                            **({"elapsed_ms": e.data["elapsed_ms"]} if "elapsed_ms" in e.data
                               else {}),
                            **({"differs": e.data["differs"]} if "differs" in e.data else {}))
    fields = attention_fields(run=session.run, category="ambiguous_write", detail=detail,
                              state=session.state, tool=tool, tool_call_id=tool_call_id,
                              status=RunStatus.UNKNOWN, evidence=evidence or None)
    session.commit(events, to=RunStatus.UNKNOWN, reason=UNKNOWN_OUTCOME, detail=detail,
                   fields=fields, also=also)
    telemetry.run_stopped(session.agent.name, RunStatus.UNKNOWN, "ambiguous_write", detail)


def wait(session: RunSession, *, kind: str, until: dt.datetime | None, data: dict[str, Any],
         events: Sequence[NewEvent] = (), also: Sequence[Callable[[], Any]] = ()) -> None:
    """Park the run in a durable wait (no worker holds it while it waits)."""
    started = NewEvent(EventType.WAIT_STARTED, {"kind": kind, "until": until.isoformat() if until else None,
                                        "data": data})
    fields = {"wait_kind": kind, "wait_until": until, "wait_data": data,
              **wait_fields(kind=kind, until=until, data=data)}
    session.commit([*events, started], to=RunStatus.WAITING, fields=fields, also=also,
                   milestone="before_wait")
    telemetry.run_waiting(kind, until)


def retry_delay(attempt: int, retry_after: float | None) -> float:
    """Return the backoff before retry ``attempt`` under the configured base and cap."""
    return backoff_delay(attempt, base=settings.AGENTOPS_BACKOFF_BASE_S,
                         cap=settings.AGENTOPS_BACKOFF_CAP_S, retry_after=retry_after,
                         jitter=clock.rng().random())


def retry_later(session: RunSession, step: str, category: str, message: str, *,
                retry_after: float | None, events: Sequence[NewEvent]) -> None:
    """Count a failed attempt at ``step``; back off (a durable timer) or block when exhausted."""
    retries = session.state["steps"].get(step, {}).get("retries", 0) + 1
    limit = session.run.step_retry_limit
    if retries > (settings.AGENTOPS_STEP_RETRY_LIMIT if limit is None else limit):
        block(session, category, f"{message} (after {retries - 1} retries)", events=events)
        return
    spent = failures_spent(session.run, session.state, events, extra=1)
    if spent:
        block(session, "failure_budget", f"{spent}; the last: {category} in step {step}: "
              f"{message}", events=events)
        return
    delay = retry_delay(retries, retry_after)
    telemetry.step_retrying(category, retries, delay)
    evs = [*events, NewEvent(EventType.STEP_RETRYING, {"step": step, "retries": retries,
                                               "error_class": category, "delay_s": delay})]
    if delay < settings.AGENTOPS_INLINE_BACKOFF_S:
        session.commit(evs)
        return
    until = clock.now() + dt.timedelta(seconds=delay)
    wait(session, kind="timer", until=until, data={"reason": f"backoff after {category}",
                                                   "step": step}, events=evs)
