"""One model turn: check budgets and guards, build the context, call the model, record the reply.

The reply and the ledger rows of the calls it asks for commit together (before_tool_call).
When every call is a plain read, they run first and the whole turn commits once.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from django.conf import settings

from agentops import clock
from agentops.agents import plan_check
from agentops.llm.protocol import ModelError, ModelReply, ToolCallRequest
from ledger.errors import ToolInvalidArguments
from ledger.keys import args_hash
from ledger.services.paging import page_tools
from runs.engine import context as ctx
from runs.engine.budgets import budget_exhausted
from runs.engine.calls import PlannedCall, plan_calls
from runs.engine.drift import drift_guard
from runs.engine.events import NewEvent
from runs.engine.jsonstate import strip_nul, unstorable_path
from runs.engine.leases import lease_kept
from runs.engine.outcomes import block, retry_later
from runs.engine.session import RunSession
from runs.engine.stall import LOOP_REPEATS, STALL_ROUNDS, loop_evidence
from runs.engine.toolrun import execute_reads_inline
from runs.event_types import EventType

PLAN_STEP = "_plan"
MAX_REPAIRS = 3
_PLAN_TOOL = {
    "type": "function",
    "function": {
        "name": "propose_plan",
        "description": "Propose the plan: a list of steps {key, title, depends_on}.",
        "parameters": {"type": "object", "properties": {"steps": {"type": "array"}},
                       "required": ["steps"]},
    },
}


def model_turn(session: RunSession, step: str) -> None:
    """Do one model turn of ``step`` (request, call, record; run inline reads)."""
    s = session.state
    why = budget_exhausted(session.run, s["usage"])
    if why:
        block(session, "budget", f"budget exhausted: {why}")
        return
    if s["guards"]["no_progress"] >= STALL_ROUNDS:
        block(session, "stall", f"{s['guards']['no_progress']} rounds without progress")
        return
    if not _requested(s):
        session.commit([NewEvent(EventType.MODEL_REQUESTED, {"step": step, "turn": s["turn"] + 1})])
    messages = _messages(session)
    tools = [_PLAN_TOOL] if step == PLAN_STEP else [t.schema() for t in session.agent.tools]
    tools += page_tools(s) if step != PLAN_STEP else []
    try:
        # A real model call may outlast the lease: keep it renewed while we wait.
        with lease_kept(session.run, session.worker, []):
            reply = session.model().complete(messages=messages, tools=tools)
    except ModelError as err:
        _model_failed(session, step, err)
        return
    _record_reply(session, step, _clean(reply))


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
    too_big = ctx.needs_compaction(messages, window) and len(s["turns"]) > 2
    if too_big or len(s["turns"]) > 2 * ctx.KEEP_TURNS:
        keep = 2 if too_big else ctx.KEEP_TURNS
        upto, summary = ctx.compaction_summary(s, keep=keep)
        session.commit([NewEvent(EventType.CONTEXT_COMPACTED, {"upto_turn": upto, "summary": summary})])
        messages = ctx.context_build(s, agent, session.context_memo)
    return messages


def _model_failed(session: RunSession, step: str, err: ModelError) -> None:
    s = session.state
    event = NewEvent(EventType.MODEL_FAILED, {"step": step, "turn": s["turn"], "category": err.category,
                                      "message": str(err)[:300]})
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


def _record_reply(session: RunSession, step: str, reply: ModelReply) -> None:
    s = session.state
    turn = s["turn"]
    usage = {"tokens": reply.usage.total_tokens, "cost_micros": reply.usage.cost_micros}
    if reply.finish_reason == "length" and (not reply.tool_calls or any(
            c.arguments is None for c in reply.tool_calls)):
        _invalid_output(session, step, turn, usage, "the reply was cut off (finish_reason=length)")
        return
    unstorable = _unstorable_call(reply)
    if unstorable:
        _invalid_output(session, step, turn, usage, f"the reply holds a {unstorable}; send "
                        "arguments as valid UTF-8 JSON")
        return
    if step == PLAN_STEP:
        _record_plan(session, turn, reply, usage)
        return
    if not reply.tool_calls:
        text = reply.text or ""
        _finish_step(session, step, turn, text, usage)
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
    data = {"step": step, "turn": turn, "text": reply.text or "", "usage": usage,
            "finish_reason": reply.finish_reason, "call_hashes": [h for h in hashes if h],
            "no_progress": _no_progress(s),
            "calls": [p.event_json() for p in planned]}
    if looping:
        names = sorted({p.name for p, h in zip(planned, hashes) if h in looping})
        block(session, "loop", f"the same call was asked for {LOOP_REPEATS} times with the same "
              f"arguments: {', '.join(names)}",
              events=[NewEvent(EventType.MODEL_REPLIED, data)], tool=names[0])
        return
    plan_calls(session, step, turn, planned, NewEvent(EventType.MODEL_REPLIED, data),
               execute_reads_inline)


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
            spec.validate(req.arguments)
        except ToolInvalidArguments as exc:
            p.error = exc.message
    return p


def _no_progress(s: dict[str, Any]) -> int:
    """Return rounds without progress: a round progresses when a call returns new facts."""
    if not s["turns"]:
        return 0
    *earlier, last = s["turns"][-20:]
    seen = [c["result"]["facts"] for t in earlier for c in t["calls"]
            if (c.get("result") or {}).get("facts") is not None]
    progressed = any(
        (c.get("result") or {}).get("status") == "succeeded"
        and not c["result"].get("deduplicated")
        and c["result"].get("facts") not in seen
        for c in last["calls"]
    )
    return 0 if progressed else s["guards"]["no_progress"] + 1


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
                                      "message": message[:300], "usage": usage})
    retry_later(session, step, "invalid_output", message, retry_after=0, events=[event])


def _finish_step(session: RunSession, step: str, turn: int, text: str,
                 usage: dict[str, Any]) -> None:
    s = session.state
    facts = {}
    for t in s["turns"]:
        if t["step"] == step:
            for c in t["calls"]:
                if c["id"] in s["facts"]:
                    facts[c["id"]] = s["facts"][c["id"]]
    events = [
        NewEvent(EventType.MODEL_REPLIED, {"step": step, "turn": turn, "text": text, "usage": usage,
                                   "finish_reason": "stop", "calls": [],
                                   "no_progress": 0}),
        NewEvent(EventType.STEP_COMPLETED, {"step": step, "output": {"text": text[:4000], "facts": facts}}),
    ]
    session.commit(events, milestone="step_complete")


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
                                   "usage": usage, "calls": [], "no_progress": 0}),
        NewEvent(EventType.PLAN_ACCEPTED, {"plan_version": s["plan_version"] + 1, "steps": steps}),
    ]
    session.commit(events, milestone="step_complete")


def step_retry_limit() -> int:
    """Return the per-step automatic retry limit."""
    return settings.AGENTOPS_STEP_RETRY_LIMIT
