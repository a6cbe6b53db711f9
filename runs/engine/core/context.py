"""The model's context, rebuilt from state on every call, in layers.

system prompt (+ a note after a recovery) -> pinned goal, constraints and input (never
trimmed, never overwritten by tool output) -> structured progress (plan, completed steps,
confirmed facts, the results kept out of the context by id with their summary) -> a summary of older turns -> the last turns with their tool results ->
the current step. Tool messages always pair with their tool_call_id.
"""
from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING, Any

from agentops.jsonstate import json_encoder
from agentops.llm.protocol import SentMessage

if TYPE_CHECKING:  # the core only annotates with it; agents pulls in model clients
    from agentops.agents import Agent


RESUMED_NOTE = (
    "This run was resumed from a checkpoint after an interruption. Everything below is the "
    "recorded state; tool calls already made are not repeated."
)
MISSING_NOTE = "Some fields are missing from this result. Do not guess or infer them."
SKIPPED_NOTE = " (SKIPPED, its work was NOT done: {why})"
INCOMPLETE_NOTE = ("## Not done yet\nYou stopped, but this step is not complete. "
                   "missing_fields: {fields}\n{reason}. Do what is missing (call the tools "
                   "it names) before you answer.")
KEPT_OUT_NOTE = ("## Full results kept out of the context\nThese results were too big to show; "
                 "call expand_result(tool_call_id, page) to read one, a page at a time.")
KEEP_TURNS = 12
COMPACT_AT = 0.7
SUMMARY_LINES = 40
# Encoders made once: every model turn encodes each recent call's arguments and result.
_JSON = json_encoder()
_SORTED = json_encoder(sort_keys=True)
_SORTED_TEXT = json_encoder(sort_keys=True, ensure_ascii=False)


def context_build(state: dict[str, Any], agent: Agent,
                  memo: dict[Any, tuple] | None = None) -> list[dict[str, Any]]:
    """Return the messages the model sees for the next call of the current step.

    ``memo`` (one per session) keeps the messages of recent turns and the lines of recent
    facts between calls: the reducer replaces (never edits) a call's args, result and facts,
    so an entry made from the very same objects (or equal ones: compared as lists, which
    takes the same objects as equal at once) is still right.
    """
    system = agent.system_prompt
    if state["recoveries"] or state.get("resumed"):
        system = f"{system}\n\n{RESUMED_NOTE}"
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    messages.append({"role": "user", "content": _pinned(state)})
    messages.append({"role": "user", "content": _progress(state, memo)})
    if state["summary"]:
        messages.append({"role": "user", "content": f"## Earlier turns (summary)\n{state['summary']}"})
    window = state["turns"][-KEEP_TURNS:]
    if memo is None:
        for turn in window:
            messages.extend(_turn_messages(turn))
        messages.append({"role": "user", "content": _current(state)})
        return messages
    fixed = len(messages)
    turn_chars = _remembered(window, memo, messages)
    if len(memo) > 4 * KEEP_TURNS + 40:
        keep: set[Any] = {id(t) for t in window} | {"facts", "size"}
        keep.update(("fact", call_id) for call_id in list(state["facts"])[-20:])
        for key in [k for k in memo if k not in keep]:
            del memo[key]
    messages.append({"role": "user", "content": _current(state)})
    # The size context_tokens reads back for this very list: the turns' sizes were counted
    # when their messages were made.
    memo["size"] = (messages, len(messages),
                    turn_chars + _chars(messages[:fixed]) + _chars(messages[-1:]))
    return messages


def context_tokens(messages: list[dict[str, Any]], memo: dict[Any, tuple] | None = None) -> int:
    """Return a cheap estimate of the tokens in ``messages`` (4 characters a token).

    Counts the text the model reads (contents, tool names and arguments) plus a little per
    message for the role and framing; no serialising, since this runs before every call.
    ``memo``: the one ``context_build`` made ``messages`` with (their size is in it).
    """
    known = memo.get("size") if memo is not None else None
    if known is not None and known[0] is messages and known[1] == len(messages):
        return known[2] // 4
    return _chars(messages) // 4


def _chars(messages: list[dict[str, Any]]) -> int:
    chars = 0
    for m in messages:
        chars += len(m.get("content") or "") + 24
        for call in m.get("tool_calls") or ():
            fn = call["function"]
            chars += len(fn["name"]) + len(fn["arguments"]) + len(call["id"]) + 48
    return chars


def needs_compaction(messages: list[dict[str, Any]], window: int,
                     memo: dict[Any, tuple] | None = None) -> bool:
    """Return True when the context is past COMPACT_AT of the model's window."""
    return context_tokens(messages, memo) > int(window * COMPACT_AT)


def compaction_summary(state: dict[str, Any], keep: int) -> tuple[int, str]:
    """Return (last turn compacted, summary text) folding all but the last ``keep`` turns."""
    old = state["turns"][:-keep] if keep else state["turns"]
    lines = [state["summary"]] if state["summary"] else []
    for turn in old:
        for call in turn["calls"]:
            result = call.get("result") or {}
            status = result.get("status", "pending")
            lines.append(f"- turn {turn['n']} ({turn['step']}): {call['name']} -> {status}: "
                         f"{(result.get('summary') or '')[:160]}")
        if not turn["calls"] and turn["text"]:
            lines.append(f"- turn {turn['n']} ({turn['step']}): said {turn['text'][:160]}")
    if len(lines) > SUMMARY_LINES:
        dropped = len(lines) - SUMMARY_LINES + 1
        lines = [f"({dropped} older lines omitted; the ledger has every call)"] + lines[-SUMMARY_LINES + 1:]
    return (old[-1]["n"] if old else 0), "\n".join(lines)


def tool_message_content(result: dict[str, Any] | None) -> str:
    """Return the JSON a tool message carries for a recorded result."""
    if result is None:
        return _JSON({"status": "pending"})
    body: dict[str, Any] = {"status": result.get("status")}
    if result.get("summary"):
        body["summary"] = result["summary"]
    if result.get("facts") is not None:
        body["facts"] = result["facts"]
    if result.get("missing_fields"):
        body["missing_fields"] = result["missing_fields"]
        body["note"] = MISSING_NOTE
    if result.get("error"):
        body["error"] = result["error"]
    if result.get("artifact"):
        body["full_result"] = "kept out of the context; expand_result reads it by tool_call_id"
    return _SORTED_TEXT(body)


def _pinned(state: dict[str, Any]) -> str:
    run = state["run"]
    text = f"## Goal\n{run.get('goal', '')}\n"
    if run.get("constraints"):
        text += "## Constraints\n" + "\n".join(f"- {c}" for c in run["constraints"]) + "\n"
    return text + "## Input\n" + _SORTED(run.get("input", {}))


def _progress(state: dict[str, Any], memo: dict[Any, tuple] | None = None) -> str:
    lines = ["## Progress"]
    for step in state["plan"]:
        st = state["steps"].get(step["key"], {})
        mark = {"succeeded": "x", "skipped": "-", "running": ">"}.get(st.get("status"), " ")
        note = SKIPPED_NOTE.format(why=(st.get("output") or {}).get("text", "")[:200]) \
            if st.get("status") == "skipped" else ""
        lines.append(f"[{mark}] {step['key']}: {step['title']}{note}")
    if state["facts"]:
        lines.append("## Confirmed facts")
        lines.append(_fact_lines(_last(state["facts"], 20), memo))
    kept = state.get("kept_out") or {}
    if kept:
        lines.append(KEPT_OUT_NOTE)
        lines.extend(f"- {call_id} ({k['tool']}): {k['summary'][:200]}"
                     for call_id, k in list(kept.items())[-20:])
    return "\n".join(lines)


def _last(items: dict[str, Any], n: int) -> list[tuple[str, Any]]:
    """Return the last ``n`` items of ``items`` in order, without copying the rest (the facts
    of every call of the run, read on every model turn)."""
    return list(islice(reversed(items.items()), n))[::-1]


def _fact_lines(items: list[tuple[str, Any]], memo: dict[Any, tuple] | None) -> str:
    """Return the lines of the last facts; unchanged since the last call (the same or equal
    facts under the same ids: a line is made from them alone), the lines made then."""
    if memo is None:
        return "\n".join(_fact_line(call_id, facts) for call_id, facts in items)
    entry = memo.get("facts")
    if entry is not None and entry[0] == items:
        return entry[1]
    lines = []
    for call_id, facts in items:  # a plain loop: every model turn, most lines known
        known = memo.get(("fact", call_id))
        if known is None or known[0] is not facts:
            known = memo[("fact", call_id)] = (facts, _fact_line(call_id, facts))
        lines.append(known[1])
    text = "\n".join(lines)
    memo["facts"] = (items, text)
    return text


def _fact_line(call_id: str, facts: Any) -> str:
    return f"- {call_id}: {_SORTED(facts)[:400]}"


def _current(state: dict[str, Any]) -> str:
    key = state["current_step"] or ""
    step = next((s for s in state["plan"] if s["key"] == key), {"title": key, "input": {}})
    turns = state["steps"].get(key, {}).get("turns", 0)
    text = (f"## Current step: {key} (turn {turns + 1})\n{step['title']}\n"
            f"## Step input\n{_SORTED(step.get('input', {}))}")
    if step.get("instructions"):
        text += f"\n## Step instructions (set by a person)\n{step['instructions']}"
    missing = state["steps"].get(key, {}).get("missing")
    if missing:
        done = step.get("completion") or {}
        reason = "Required: " + ", ".join(
            [f"a successful {t}" for t in done.get("tools", [])]
            + [f"fact {f}" for f in done.get("facts", [])]
            + (["a JSON answer fitting the output schema"] if "output_schema" in done else []))
        text += "\n" + INCOMPLETE_NOTE.format(fields=_JSON(missing), reason=reason)
    return text


def _remembered(window: list[dict[str, Any]], memo: dict[Any, tuple],
                messages: list[dict[str, Any]]) -> int:
    """Append the messages of the turns in ``window`` to ``messages`` and return their size
    (``_chars``); a turn's are made again only when it changed (one loop, not a call a turn)."""
    # An entry holds the turn itself (so its id is not reused) and a copy of each of its
    # calls as they were: the messages are made from a call's id, name, args and result
    # alone, so calls still equal to those copies (the same objects, compared at once, or
    # equal ones) make the same messages.
    chars = 0
    for turn in window:
        entry = memo.get(id(turn))
        if (entry is None or entry[0] is not turn or entry[1] != turn["text"]
                or entry[2] != turn["calls"]):
            made = _turn_messages(turn)
            entry = memo[id(turn)] = (turn, turn["text"], [dict(c) for c in turn["calls"]],
                                      made, _chars(made))
        messages.extend(entry[3])
        chars += entry[4]
    return chars


def _turn_messages(turn: dict[str, Any]) -> list[dict[str, Any]]:
    """Return a turn's messages: SentMessages, so a client encodes them once, not at every
    later call that shows this turn again (``_remembered`` keeps them while the turn stays)."""
    msg: dict[str, Any] = {"role": "assistant", "content": turn["text"] or ""}
    if turn["calls"]:
        msg["tool_calls"] = [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": _JSON(c.get("args") or {})}}
            for c in turn["calls"]
        ]
    out = [SentMessage(msg)]
    for c in turn["calls"]:
        out.append(SentMessage(role="tool", tool_call_id=c["id"],
                               content=tool_message_content(c.get("result"))))
    return out
