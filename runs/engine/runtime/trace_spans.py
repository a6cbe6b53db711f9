"""A run's OpenTelemetry trace: one trace per attempt, spans for steps, model and tool calls.

An attempt is a run's work from its start, or from a recovery after its worker was lost, to
its end or its next loss (``Run.recoveries`` + 1). Ids of the spans that outlive a process
are derived from the run (``attempt_ref``, ``step_ref``); a model or tool call's span has a
fresh id, written into the event that records the call (``trace_id``, ``span_id``) and onto
the log lines of the call, so a log line, an event and a span join on one id.

Tree (GenAI semantic conventions): ``invoke_agent`` (the attempt) → one span per step →
``chat`` (a model call: gen_ai.system, request model, tokens, finish reason) → the
``execute_tool`` spans of the calls that reply asked for (tool name, effect class, ledger
id, attempt, outcome). A tool call run in another session than its model call hangs off
the step. An attempt after a recovery links to the one before it.

Every hook returns at once when tracing is off (``session.trace`` is None: one attribute
test, nothing allocated, no clock read), and none does I/O: spans go to the
BatchSpanProcessor's queue (agentops.observability.tracing).
"""
from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

from agentops import clock
from agentops.observability.logging import run_log_context, run_log_stamp
from agentops.observability.tracing import (
    SpanOut,
    SpanRef,
    content_captured,
    content_json,
    derived_id,
    hex_id,
    new_span_id,
    span_emit,
    tracer,
)
from ledger.artifacts import artifact_put
from opentelemetry.trace import SpanKind
from runs.event_types import EventType
from runs.models import Run, Step
from runs.models.event import run_events

PREVIEW_CHARS = 500
# What the hooks hand back with tracing off: shared, never built per call.
_UNTRACED = nullcontext()
_NO_MARKS: Mapping[str, Any] = MappingProxyType({})


@dataclass
class TraceCtx:
    """What a session knows of its attempt's trace."""

    run_id: str
    attempt: int
    agent: str
    started: dt.datetime
    # The current model call's ids (and prompt), written into the event recording it.
    marks: dict[str, Any] = field(default_factory=dict)
    # The model call's span and content, emitted once the unit recording its reply commits:
    # by then the secrets its tool calls carry are sealed and known to the scrubber.
    pending: tuple[Any, ...] | None = None

    # Derived ids (two SHA-256 each) are worked out once per session, not once per span.
    steps: dict[str, int] = field(default_factory=dict)

    @cached_property
    def ref(self) -> SpanRef:
        """Return the attempt's root span."""
        return attempt_ref(self.run_id, self.attempt)

    def step_span(self, step: str) -> int:
        """Return the span id of ``step`` in this attempt."""
        if step not in self.steps:
            self.steps[step] = step_ref(self.run_id, self.attempt, step).span_id
        return self.steps[step]


def attempt_ref(run_id: Any, attempt: int) -> SpanRef:
    """Return the root span of a run's attempt (its trace id and span id)."""
    return SpanRef(derived_id(run_id, attempt, bits=128), derived_id(run_id, attempt, "run"))


def step_ref(run_id: Any, attempt: int, step: str) -> SpanRef:
    """Return the span of ``step`` in a run's attempt."""
    return SpanRef(derived_id(run_id, attempt, bits=128), derived_id(run_id, attempt, "step", step))


def _ids(ref: SpanRef) -> dict[str, str]:
    return {"trace_id": hex_id(ref.trace_id, 128), "span_id": hex_id(ref.span_id)}


def _attempt_started(run: Run, attempt: int) -> dt.datetime:
    """Return when ``attempt`` began: the run's start, or the recovery that opened it."""
    if attempt > 1:
        at = (run_events(run).filter(type=EventType.RUN_RECOVERED,
                                   data__recoveries=attempt - 1)
              .values_list("at", flat=True).first())
        if at is not None:
            return at
    return run.started_at or run.created_at


def tick_began(session: Any) -> None:
    """Give the session its attempt's trace (when tracing is on) and stamp its logs."""
    if tracer() is None:
        return
    run = session.run
    attempt = run.recoveries + 1
    session.trace = TraceCtx(run_id=str(run.pk), attempt=attempt, agent=session.agent.name,
                             started=_attempt_started(run, attempt))
    run_log_stamp(trace_id=hex_id(session.trace.ref.trace_id, 128))


def model_began(session: Any) -> int | None:
    """Return the span id of the model call about to start (None when tracing is off)."""
    if session.trace is None:
        return None
    session.trace.marks, session.trace.pending = {}, None  # a reply never recorded: dropped
    return new_span_id()


def model_logged(span_id: int | None) -> AbstractContextManager[Any]:
    """Return the block stamping a model call's span id on its log lines (nothing when off)."""
    return _UNTRACED if span_id is None else run_log_context(span_id=hex_id(span_id))


def model_ended(session: Any, step: str, turn: int, span_id: int | None, started: dt.datetime,
                messages: list[dict[str, Any]], reply: Any = None, error: Any = None) -> None:
    """Emit a model call's ``chat`` span and note its ids (and prompt) for its event."""
    tc = session.trace
    if tc is None or span_id is None:
        return
    model = session.model()
    requested = str(getattr(model, "model", "") or "")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": getattr(model, "system", "") or type(model).__name__.lower(),
        "gen_ai.request.model": requested or None,
        "agentops.run_id": tc.run_id, "agentops.step": step, "agentops.turn": turn,
    }
    if reply is not None:
        attributes.update({
            "gen_ai.response.model": reply.model or None,
            "gen_ai.usage.input_tokens": reply.usage.prompt_tokens,
            "gen_ai.usage.output_tokens": reply.usage.completion_tokens,
            "gen_ai.response.finish_reasons": [reply.finish_reason],
            "agentops.cost_micros": reply.usage.cost_micros,
        })
    else:
        attributes["error.type"] = error.category
    ref = SpanRef(tc.ref.trace_id, span_id)
    tc.marks = _ids(ref)
    content: dict[str, Any] = {}
    if content_captured():
        content = _content(session, messages, reply, tc.marks)
    tc.pending = (SpanOut(f"chat {requested}".strip(), ref,
                          tc.step_span(step), started, clock.now(),
                          attributes, kind=SpanKind.CLIENT,
                          error=str(error) if error is not None else ""), content)


def _content(session: Any, messages: list[dict[str, Any]], reply: Any,
             marks: dict[str, Any]) -> dict[str, Any]:
    """Return the prompt and reply for the span; keep the prompt (redacted) as an artifact."""
    secrets = session.secrets
    prompt = secrets.scrub(messages, engine=True) if secrets else messages
    text = json.dumps(prompt, ensure_ascii=False, default=str)
    sha = artifact_put(text.encode(), content_type="application/json", secrets=secrets)
    marks["prompt"] = {"artifact": sha, "chars": len(text), "messages": len(messages),
                       "preview": secrets.scrub_text(text[-PREVIEW_CHARS:])}
    out: dict[str, Any] = {"gen_ai.input.messages": prompt}
    if reply is not None:
        out["gen_ai.output.messages"] = [{
            "role": "assistant", "content": reply.text or "",
            "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in reply.tool_calls]}]
    return out


def unit_committed(session: Any) -> None:
    """Emit the model call whose reply this committed unit recorded, its content redacted.

    Scrubbed now, not when the reply came: the unit sealed the sensitive arguments of the
    calls the reply asked for, so the scrubber knows them.
    """
    tc = session.trace
    if tc is None or tc.pending is None:
        return
    out, content = tc.pending
    tc.pending = None
    secrets = session.secrets
    for key, value in content.items():
        out.attributes[key] = content_json(secrets.scrub(value, engine=True) if secrets
                                           else value)
    span_emit(out)


def marks(session: Any) -> Mapping[str, Any]:
    """Return the current model call's trace ids (and prompt) for its event; empty when off.

    Read only: the caller spreads it into the event's data.
    """
    return _NO_MARKS if session.trace is None else session.trace.marks


def tools_settled(session: Any, step: str, settled: list[Any],
                  started: dt.datetime) -> dict[str, str] | None:
    """Emit each settled attempt's ``execute_tool`` span; stamp its ids on its events.

    Returns the span id of each call by tool_call_id (for its log line); None when off.
    """
    tc = session.trace
    if tc is None:
        return None
    now, spans = clock.now(), {}
    for st in settled:
        call = st.call
        ref = SpanRef(tc.ref.trace_id, new_span_id())
        ids = _ids(ref)
        for e in st.events:
            e.data.update(ids)
            e.__dict__.pop("_data_json", None)  # sized and written after this
        spans[call.tool_call_id] = ids["span_id"]
        parent, links = _tool_parent(session, step, call.tool_call_id)
        attempt = st.attempt.attempt if st.attempt is not None else call.attempts
        span_emit(SpanOut(f"execute_tool {call.tool}", ref, parent, started, now, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.tool,
            "gen_ai.tool.call.id": call.tool_call_id,
            "agentops.tool.effect_class": call.effect_class,
            "agentops.ledger.tool_call_id": call.tool_call_id,
            "agentops.tool.attempt": attempt, "agentops.tool.outcome": st.status,
            "agentops.tool.next": st.next, "error.type": st.category or None,
        }, links=links, error=st.category if st.status not in ("succeeded", "running") else ""))
    return spans


def _tool_parent(session: Any, step: str, call_id: str) -> tuple[int, list[Any]]:
    """Return a tool call's parent span id and links.

    Its parent is the model call that asked for it when that call is in this attempt's trace;
    otherwise the step, with a link to the model call in the earlier attempt.
    """
    tc = session.trace
    asked = (session.state["open_calls"].get(call_id) or {}).get("span")
    if asked and int(asked[0], 16) == tc.ref.trace_id:
        return int(asked[1], 16), []
    links = [SpanRef(int(asked[0], 16), int(asked[1], 16)).link(
        **{"agentops.link": "asked_by"})] if asked else []
    return tc.step_span(step), links


def step_ended(session: Any, step: str, outcome: str, started: dt.datetime | None) -> None:
    """Emit a finished step's span (under its attempt's root)."""
    tc = session.trace
    if tc is None:
        return
    _step_emit(tc.run_id, tc.attempt, step, started or tc.started, tc.started, clock.now(),
               outcome, "" if outcome in ("succeeded", "skipped") else outcome)


def _step_emit(run_id: str, attempt: int, step: str, started: dt.datetime,
               attempt_started: dt.datetime, end: dt.datetime, outcome: str, error: str) -> None:
    links = []
    if attempt > 1 and started < attempt_started:
        links.append(step_ref(run_id, attempt - 1, step).link(**{"agentops.link": "resumed"}))
    span_emit(SpanOut(f"step {step}", step_ref(run_id, attempt, step),
                      attempt_ref(run_id, attempt).span_id, max(started, attempt_started), end,
                      {"agentops.run_id": run_id, "agentops.step": step,
                       "agentops.attempt": attempt, "agentops.outcome": outcome},
                      links=links, error=error))


def attempt_ended(session: Any, status: str) -> None:
    """Emit the attempt's root span once the run ended."""
    tc = session.trace
    if tc is None:
        return
    _root_emit(tc.run_id, tc.attempt, tc.agent, tc.started, clock.now(), status,
               "" if status in ("succeeded", "completed_with_exceptions") else status)


def _root_emit(run_id: str, attempt: int, agent: str, started: dt.datetime, end: dt.datetime,
               outcome: str, error: str) -> None:
    links = [attempt_ref(run_id, attempt - 1).link(**{"agentops.link": "previous_attempt"})
             ] if attempt > 1 else []
    span_emit(SpanOut(f"invoke_agent {agent}", attempt_ref(run_id, attempt), None, started, end,
                      {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
                       "agentops.run_id": run_id, "agentops.attempt": attempt,
                       "agentops.outcome": outcome}, links=links, error=error))


def recovery_marks(run_id: Any, lost_attempt: int) -> dict[str, str]:
    """Return the run.recovered event's trace ids: the next attempt's and the lost one's."""
    if tracer() is None:
        return {}
    return {"trace_id": hex_id(attempt_ref(run_id, lost_attempt + 1).trace_id, 128),
            "previous_trace_id": hex_id(attempt_ref(run_id, lost_attempt).trace_id, 128)}


def attempt_lost(run: Run, lost_attempt: int) -> None:
    """Emit what a lost worker could not: its attempt's root and its open step, ended in error.

    They end at the lost worker's last event; the new attempt starts at the recovery, so the
    gap between the two traces is the time the run had no worker.
    """
    if tracer() is None:
        return
    run_id = str(run.pk)
    started = _attempt_started(run, lost_attempt)
    end = _last_work(run, lost_attempt) or clock.now()
    step = run.current_step
    if step:
        step_at = (Step.objects.filter(run_id=run.pk, key=step)
                   .values_list("started_at", flat=True).first()) or started
        _step_emit(run_id, lost_attempt, step, step_at, started, end, "worker_lost",
                   "worker_lost")
    _root_emit(run_id, lost_attempt, run.agent_name, started, end, "worker_lost", "worker_lost")


def _last_work(run: Run, lost_attempt: int) -> dt.datetime | None:
    """Return when the lost attempt's last event was written (before its recovery)."""
    events = run_events(run)
    recovered = (events.filter(type=EventType.RUN_RECOVERED, data__recoveries=lost_attempt)
                 .values_list("seq", flat=True).first())
    if recovered is not None:
        events = events.filter(seq__lt=recovered)
    return events.order_by("-seq").values_list("at", flat=True).first()
