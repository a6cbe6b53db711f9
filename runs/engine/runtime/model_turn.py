"""One model turn: check budgets and guards, build the context, call the model, record the reply.

The reply and the ledger rows of the calls it asks for commit together (before_tool_call).
When every call is a plain read, they run inline: of tools seen to answer quickly, the
reply waits for them and goes out with their results as one unit before the next model call
(runs.engine.runtime.read_rides.reads_held); otherwise the reply, their rows and their
opened attempts go out as one unit (sent, committed while the reads run), the reads run,
and their results commit with the next unit (a quick read's ride the next reply's,
runs.engine.runtime.read_rides.results_ride).
"""
from __future__ import annotations

import dataclasses
from typing import Any


from agentops import clock
from agentops.agents import plan_check
from agentops.llm.protocol import (ModelError, ModelOptions, ModelReply, SentMessage,
                                   ToolCallRequest)
from agentops.tools import ToolSpec
from ledger.errors import ToolInvalidArguments
from ledger.keys import args_hash
from ledger.services.expand import expand_tools
from ledger.services.paging import page_tools
from runs.engine.core import context as ctx
from runs.engine.runtime import telemetry, trace_spans
from runs.engine.runtime.budgets import budget_exhausted
from runs.engine.runtime.calls import PlannedCall, plan_calls
from runs.engine.runtime.drift import drift_guard
from runs.engine.runtime.events import NewEvent
from agentops.jsonstate import strip_nul, unstorable_path
from runs.engine.runtime.leases import lease_kept
from runs.engine.runtime.outcomes import block, retry_later
from runs.engine.runtime.prices import prices_load, reply_cost
from runs.engine.runtime.session import RunSession
from runs.engine.runtime.step_end import finish_step, turns_used
from runs.engine.core.stall import LOOP_REPEATS, STALL_ROUNDS, loop_evidence
from runs.engine.core.offer import tool_offer
from runs.engine.runtime.tool_phase import execute_reads_inline
from runs.event_types import EventType
from runs.live import live_text_sink

PLAN_STEP = "_plan"
MAX_REPAIRS = 3
_PLAN_TOOL = SentMessage(type="function", function=SentMessage(
    name="propose_plan",
    description="Propose the plan: a list of steps {key, title, depends_on}.",
    parameters={"type": "object", "properties": {"steps": {"type": "array"}},
                "required": ["steps"]},
))
# Tool schemas as sent, by (tool, strict): see _schema.
_SCHEMAS: dict[tuple[int, bool], tuple[ToolSpec, SentMessage]] = {}
_SCHEMAS_MAX = 256


def model_turn(session: RunSession, step: str) -> None:
    """Do one model turn of ``step`` (request, call, record; run inline reads)."""
    s = session.state
    if _turn_refused(session, step):
        return
    if not _requested(s):
        session.commit([NewEvent(EventType.MODEL_REQUESTED, {"step": step, "turn": s["turn"] + 1})])
    messages = _messages(session)
    model = session.model()
    options = getattr(model, "options", None) or ModelOptions()
    tools = [_PLAN_TOOL] if step == PLAN_STEP else [
        _schema(t, options.strict) for t in session.agent.tools]
    tools += page_tools(s, session.tools_memo) + expand_tools(s) if step != PLAN_STEP else []
    tools, choice = tool_offer(s, step, session.agent, options, tools)
    sink = live_text_sink(session.run.pk, step=step, turn=s["turn"]) if options.stream else None
    span_id = trace_spans.model_began(session)
    with trace_spans.model_logged(span_id):
        reply = _call(session, step, messages, tools, choice, sink, span_id)
    if reply is not None:
        _record_reply(session, step, _clean(reply))


def _schema(spec: ToolSpec, strict: bool) -> SentMessage:
    """Return ``spec.schema(strict=strict)`` made once per tool, its two outer levels frozen
    (SentMessages): a client that writes the request body itself sends their text as made
    at the first call, not encoded again at each (the same tools every call of a run).

    A ToolSpec is frozen; its ``parameters`` are shared by every schema it makes, as
    ``schema()`` always shared them, and are never edited once declared (its validator and
    agentops.schema_quick's check are made once from them too).
    """
    entry = _SCHEMAS.get((id(spec), strict))
    if entry is not None and entry[0] is spec:
        return entry[1]
    made = spec.schema(strict=strict)
    frozen = SentMessage({k: SentMessage(v) if type(v) is dict else v for k, v in made.items()})
    if len(_SCHEMAS) >= _SCHEMAS_MAX:
        _SCHEMAS.clear()
    _SCHEMAS[(id(spec), strict)] = (spec, frozen)
    return frozen


def _call(session: RunSession, step: str, messages: list[dict[str, Any]], tools: list[Any],
          choice: Any, sink: Any, span_id: int | None) -> ModelReply | None:
    """Call the model; record a failure and return None, else return the priced reply."""
    model, turn, started = session.model(), session.state["turn"], clock.now()
    try:
        # A real model call may outlast the lease: keep it renewed while we wait.
        with lease_kept(session.run, session.worker, []):
            reply = model.complete(messages=messages, tools=tools, tool_choice=choice,
                                   on_text=sink)
    except ModelError as err:
        if sink is not None:
            sink.flush()
        telemetry.model_called(session.agent.name, err.category)
        trace_spans.model_ended(session, step, turn, span_id, started, messages, error=err)
        _note_call(session, started)
        _model_failed(session, step, err)
        return None
    if sink is not None:
        sink.flush()
    reply = _priced(session, reply)
    telemetry.model_called(session.agent.name, "ok", tokens=reply.usage.total_tokens,
                           cost_micros=reply.usage.cost_micros)
    trace_spans.model_ended(session, step, turn, span_id, started, messages, reply=reply)
    _note_call(session, started)
    return reply


def _note_call(session: RunSession, started: Any) -> None:
    """Keep what the event recording this call says of it: how long it took, its trace ids."""
    ms = int((clock.now() - started).total_seconds() * 1000)
    session.reply_marks = {"ms": ms, **trace_spans.marks(session)}


def _priced(session: RunSession, reply: ModelReply) -> ModelReply:
    """Return ``reply`` with its cost: the provider's figure, else its tokens x the price table."""
    model = reply.model or str(getattr(session.model(), "model", "") or "")
    cost = reply_cost(prices_load(), model, reply.usage)
    if cost == reply.usage.cost_micros:
        return reply
    return dataclasses.replace(reply, usage=dataclasses.replace(reply.usage, cost_micros=cost))


def _clean(reply: ModelReply) -> ModelReply:
    """Return ``reply`` with NUL characters and lone surrogates replaced in its free text.

    Tool-call arguments are JSON the engine stores as given: unstorable strings there are
    refused as invalid output (``_unstorable_call``), not repaired behind the model's back.
    """
    text = strip_nul(reply.text or "")
    names = [strip_nul(c.name) for c in reply.tool_calls]
    if text == reply.text and names == [c.name for c in reply.tool_calls]:
        return reply
    calls = tuple(dataclasses.replace(c, name=n) for c, n in zip(reply.tool_calls, names))
    return dataclasses.replace(reply, text=text, tool_calls=calls)


def _unstorable_call(reply: ModelReply) -> str:
    """Return where a tool call's arguments hold a string PostgreSQL cannot store, or ""."""
    for i, c in enumerate(reply.tool_calls):
        path, why = unstorable_path(c.arguments, f"tool_calls[{i}].arguments")
        if path:
            return f"{why} at {path} ({c.name})"
    return ""


def _requested(s: dict[str, Any]) -> bool:
    last = s["turns"][-1]["n"] if s["turns"] else 0
    return s["turn"] > last


def _messages(session: RunSession) -> list[dict[str, Any]]:
    s, agent = session.state, session.agent
    messages = ctx.context_build(s, agent, session.context_memo)
    window = getattr(session.model(), "context_window", 8192)
    # Fold old turns into the summary when the context nears the window, and also when the
    # state holds turns the context no longer shows: the state stays bounded, so snapshots
    # and loads cost the same at turn 10 and turn 10,000.
    too_big = ctx.needs_compaction(messages, window, session.context_memo) and len(s["turns"]) > 2
    if too_big or len(s["turns"]) > 2 * ctx.KEEP_TURNS:
        keep = 2 if too_big else ctx.KEEP_TURNS
        upto, summary = ctx.compaction_summary(s, keep=keep)
        # Derived from the state alone: written with the reply's unit, not a commit of its own.
        session.defer([NewEvent(EventType.CONTEXT_COMPACTED, {"upto_turn": upto,
                                                              "summary": summary})])
        messages = ctx.context_build(s, agent, session.context_memo)
    return messages


def _model_failed(session: RunSession, step: str, err: ModelError) -> None:
    s = session.state
    event = NewEvent(EventType.MODEL_FAILED, {"step": step, "turn": s["turn"], "category": err.category,
                                      "message": str(err)[:300],
                                      **session.reply_marks})
    if err.category == "context_overflow" and len(s["turns"]) > 1:
        upto, summary = ctx.compaction_summary(s, keep=1)
        event2 = NewEvent(EventType.CONTEXT_COMPACTED, {"upto_turn": upto, "summary": summary})
        retry_later(session, step, err.category, str(err), retry_after=0, events=[event, event2])
        return
    if err.retryable:
        retry_later(session, step, err.category, str(err), retry_after=err.retry_after,
                    events=[event])
        return
    block(session, err.category, f"model call failed: {err.category}", events=[event])


def _replied_data(session: RunSession, step: str, reply: ModelReply, usage: dict[str, int],
                  planned: list[Any], hashes: list[str]) -> dict[str, Any]:
    """Return the ``model.replied`` event's data for a reply asking for tool calls."""
    s = session.state
    return {"step": step, "turn": s["turn"], "text": reply.text or "", "usage": usage,
            "finish_reason": reply.finish_reason, "call_hashes": [h for h in hashes if h],
            "no_progress": _no_progress(s),
            "calls": [p.event_json() for p in planned], **_repaired(reply),
            **session.reply_marks}


def _turn_refused(session: RunSession, step: str) -> bool:
    """Block the run and return True when its budget, turn limit or stall guard says stop."""
    s = session.state
    why = budget_exhausted(session.run, s["usage"])
    if why:
        block(session, "budget", f"budget exhausted: {why}")
        return True
    if step != PLAN_STEP and turns_used(s, step) >= session.agent.max_turns_per_step:
        block(session, "turn_limit", f"step {step} used its {session.agent.max_turns_per_step} "
              "model turns (Agent.max_turns_per_step) without finishing")
        return True
    if s["guards"]["no_progress"] >= STALL_ROUNDS:
        block(session, "stall", f"{s['guards']['no_progress']} rounds without progress")
        return True
    return False


def _record_reply(session: RunSession, step: str, reply: ModelReply) -> None:
    s = session.state
    turn = s["turn"]
    usage = {"tokens": reply.usage.total_tokens, "cost_micros": reply.usage.cost_micros}
    if _reply_unusable(session, step, turn, usage, reply):
        return
    if step == PLAN_STEP:
        _record_plan(session, turn, reply, usage)
        return
    if not reply.tool_calls:
        text = reply.text or ""
        finish_step(session, step, turn, text, usage,
                     {**_repaired(reply), **session.reply_marks})
        return
    planned = [_plan_one(session, i, req) for i, req in enumerate(reply.tool_calls)]
    if drift_guard(session, step, turn, planned, usage):
        return
    if all(p.error for p in planned) and _repairs(s) >= MAX_REPAIRS - 1:
        # Broken output is checked before the loop guard: it is not a repeated call.
        _invalid_output(session, step, turn, usage, planned[0].error or "invalid tool calls")
        return
    # A call the model could not form has no arguments to compare: it never counts as a repeat.
    hashes = [args_hash({"tool": p.name, "args": p.args}) if not p.error else ""
              for p in planned]
    looping = loop_evidence(s["guards"]["recent_calls"], [h for h in hashes if h])
    data = _replied_data(session, step, reply, usage, planned, hashes)
    if looping:
        names = sorted({p.name for p, h in zip(planned, hashes) if h in looping})
        block(session, "loop", f"the same call was asked for {LOOP_REPEATS} times with the same "
              f"arguments: {', '.join(names)}",
              events=[NewEvent(EventType.MODEL_REPLIED, data)], tool=names[0])
        return
    plan_calls(session, step, turn, planned, NewEvent(EventType.MODEL_REPLIED, data),
               execute_reads_inline)


def _reply_unusable(session: RunSession, step: str, turn: int, usage: dict[str, Any],
                    reply: ModelReply) -> bool:
    """Record a refusal, a cut-off reply or unstorable arguments; True when it was one."""
    if reply.refused:
        _refused(session, step, turn, usage, reply)
        return True
    if reply.finish_reason == "length" and (not reply.tool_calls or any(
            c.arguments is None for c in reply.tool_calls)):
        _invalid_output(session, step, turn, usage, "the reply was cut off (finish_reason=length)")
        return True
    unstorable = _unstorable_call(reply)
    if unstorable:
        _invalid_output(session, step, turn, usage, f"the reply holds a {unstorable}; send "
                        "arguments as valid UTF-8 JSON")
        return True
    return False


def _repaired(reply: ModelReply) -> dict[str, Any]:
    """Return what repair turns sent back to the model in this call (for the event log)."""
    return {"repairs": [r[:300] for r in reply.repairs]} if reply.repairs else {}


def _plan_one(session: RunSession, index: int, req: ToolCallRequest) -> PlannedCall:
    call_id = clock.new_id("tc")
    spec = session.agent.tool(req.name)
    p = PlannedCall(index=index, call_id=call_id, name=req.name, args=req.arguments,
                    provider_id=req.provider_id, spec=spec)
    if spec is None:
        known = ", ".join(t.name for t in session.agent.tools)
        p.error = f"there is no tool called {req.name!r}; the tools are: {known}"
    elif req.arguments is None:
        p.error = f"the arguments for {req.name} were not a JSON object: {req.raw_arguments[:200]!r}"
    else:
        try:
            p.args = spec.validate(req.arguments)
        except ToolInvalidArguments as exc:
            p.error = exc.message
    return p


def _no_progress(s: dict[str, Any]) -> int:
    """Return rounds without progress: a round progresses when a call returns new facts."""
    if not s["turns"]:
        return 0
    *earlier, last = s["turns"][-20:]
    fresh = [r.get("facts") for c in last["calls"] if (r := c.get("result"))
             and r.get("status") == "succeeded" and not r.get("deduplicated")]
    if fresh:  # else nothing to compare: the earlier turns are not looked at
        seen = [f for t in earlier for c in t["calls"]
                if (r := c.get("result")) and (f := r.get("facts")) is not None]
        if any(f not in seen for f in fresh):
            return 0
    return s["guards"]["no_progress"] + 1


def _repairs(s: dict[str, Any]) -> int:
    n = 0
    for turn in reversed(s["turns"]):
        if turn["calls"] and all((c.get("result") or {}).get("error", {}).get("category")
                                 == "invalid_arguments" for c in turn["calls"]):
            n += 1
        else:
            break
    return n


def _invalid_output(session: RunSession, step: str, turn: int, usage: dict[str, Any],
                    message: str) -> None:
    event = NewEvent(EventType.MODEL_FAILED, {"step": step, "turn": turn, "category": "invalid_output",
                                      "message": message[:300], "usage": usage,
                                      **session.reply_marks})
    retry_later(session, step, "invalid_output", message, retry_after=0, events=[event])


def _refused(session: RunSession, step: str, turn: int, usage: dict[str, Any],
             reply: ModelReply) -> None:
    """Stop the step: the model refused, and asking the same context again gets the same."""
    said = strip_nul(reply.refusal or reply.text or "")[:300]
    how = ("its provider's content filter stopped the reply" if reply.finish_reason ==
           "content_filter" else "the model refused to answer")
    detail = f"{how} in step {step}" + (f": {said!r}" if said else "")
    event = NewEvent(EventType.MODEL_FAILED, {"step": step, "turn": turn,
                                              "category": "model_refused",
                                              "message": detail[:300], "usage": usage,
                                              **session.reply_marks})
    block(session, "model_refused", detail, events=[event])


def _record_plan(session: RunSession, turn: int, reply: ModelReply, usage: dict[str, Any]) -> None:
    s = session.state
    req = reply.tool_calls[0] if reply.tool_calls else None
    try:
        steps = plan_check(session.agent.name, (req.arguments or {}).get("steps") if req else None)
    except ValueError as exc:
        _invalid_output(session, PLAN_STEP, turn, usage, f"invalid plan: {exc}")
        return
    events = [
        NewEvent(EventType.MODEL_REPLIED, {"step": PLAN_STEP, "turn": turn, "text": reply.text or "",
                                   "usage": usage, "calls": [], "no_progress": 0,
                                   **session.reply_marks}),
        NewEvent(EventType.PLAN_ACCEPTED, {"plan_version": s["plan_version"] + 1, "steps": steps}),
    ]
    session.commit(events, milestone="step_complete")

