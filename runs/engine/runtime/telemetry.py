"""What the engine reports about itself: Prometheus counters and log lines at meaningful points.

The engine calls these small hooks; they never raise into a unit of work and never query the
database on the hot path (a step's start time is remembered by the session that started it;
only a step that spanned ticks reads its Step row once, when it ends). Every log line inside
a tick carries run_id (and step / tool_call_id where known) through ``run_log_context``.
"""
from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from agentops import clock
from agentops.observability import metrics
from agentops.observability.logging import run_log_context
from runs.engine.runtime import trace_spans
from runs.models import Step

log = logging.getLogger("agentops.engine")
_STEP_ENDS = {"step.completed": "succeeded", "step.skipped": "skipped", "step.failed": ""}


def events_committed(session: Any, events: Sequence[Any], *, ended: str = "") -> None:
    """Count the unit and observe the latency of every step these committed events end.

    ``ended``: the status this unit ended the run in (its attempt's root span goes out then).
    """
    agent = session.agent.name
    metrics.count_unit(agent)
    trace_spans.unit_committed(session)
    for e in events:
        if e.type == "step.started":
            session.step_started[e.data["step"]] = clock.now()
            log.debug("step %s started", e.data["step"], extra={"step": e.data["step"]})
        elif e.type in _STEP_ENDS:
            _step_ended(session, e.data["step"], _STEP_ENDS[e.type] or e.data.get("status",
                                                                                   "failed"))
    if ended:
        trace_spans.attempt_ended(session, ended)


def _step_ended(session: Any, step: str, outcome: str) -> None:
    started = session.step_started.pop(step, None) or _step_started_at(session.run.pk, step)
    if started is not None:
        metrics.observe_step(session.agent.name, outcome,
                             (clock.now() - started).total_seconds())
    trace_spans.step_ended(session, step, outcome, started)
    log.info("step %s %s", step, outcome, extra={"step": step})


def _step_started_at(run_id: Any, step: str) -> dt.datetime | None:
    return (Step.objects.filter(run_id=run_id, key=step)
            .values_list("started_at", flat=True).first())


def model_called(agent: str, outcome: str, *, tokens: int = 0, cost_micros: int = 0) -> None:
    """Count one model call by outcome and add its usage."""
    metrics.count_model_call(agent, outcome)
    metrics.observe_model_usage(agent, tokens, cost_micros)
    if outcome == "ok":
        log.debug("model replied (%d tokens, %d micro-dollars)", tokens, cost_micros)
    else:
        log.warning("model call failed: %s", outcome)


def tools_settled(settled: Iterable[Any], started: dt.datetime,
                  spans: dict[str, str] | None = None) -> None:
    """Observe each settled tool-call attempt and log its outcome under its tool_call_id.

    ``spans``: each call's span id (runs.engine.runtime.trace_spans), stamped on its line.
    """
    seconds = (clock.now() - started).total_seconds()
    for st in settled:
        call = st.call
        outcome = "ok" if st.status == "succeeded" else (st.category or st.status)
        metrics.observe_tool_call(call.tool, outcome, seconds)
        if st.next == "retry":
            metrics.count_retry("tool")
        # A warning is for what needs a person (block, unknown); a retry or a park is routine.
        level = logging.WARNING if st.next in ("block", "unknown") else logging.INFO
        if log.isEnabledFor(level):  # the context costs more than the disabled line itself
            with run_log_context(tool_call_id=call.tool_call_id, attempt=call.attempts or None,
                                 span_id=(spans or {}).get(call.tool_call_id)):
                log.log(level, "tool %s %s (next: %s)", call.tool, outcome, st.next)


def run_stopped(agent: str, status: str, category: str, detail: str) -> None:
    """Log why a run stopped for a person (blocked, unknown) and count exhausted budgets."""
    if category == "budget":
        metrics.count_budget_exhausted(agent)
    log.warning("run %s (%s): %s", status, category, detail[:300])


def run_waiting(kind: str, until: dt.datetime | None) -> None:
    """Log a durable wait."""
    log.info("run waiting for %s%s", kind, f" until {until.isoformat()}" if until else "")


def step_retrying(category: str, retries: int, delay_s: float) -> None:
    """Count and log an automatic retry of a step."""
    metrics.count_retry("step")
    log.info("step retry %d after %s in %.2fs", retries, category, delay_s)


def tick_event(message: str, *args: Any, level: int = logging.INFO) -> None:
    """Log a tick's claim, end or lost lease (counted) inside its run context."""
    if message.startswith("lease lost"):
        metrics.count_lease_lost()
    log.log(level, message, *args)


def run_recovered(run: Any, count: int, owner: str, blocked: bool) -> None:
    """Count one recovery of a run whose worker died, log it under the run's id, and emit
    the spans its lost attempt could not (runs.engine.runtime.trace_spans)."""
    metrics.count_recovery()
    trace_spans.attempt_lost(run, count)
    with run_log_context(run_id=run.pk):
        log.warning("run recovered from lost worker %s (recovery %d)%s", owner, count,
                    "; recovery limit reached, blocked" if blocked else "")
