"""Realistic event logs for benchmarks: the shapes runs/engine/core/reducer.py handles.

A run is run.created, run.status (queued -> running), then steps; a step is step.started,
2-5 tool turns (model.requested, model.replied with one tool call, tool.result with facts and
a summary), a closing turn without calls, and step.completed. Every 40 turns the context is
compacted. The log ends with the events that put the run in its final status.
"""
from __future__ import annotations

import hashlib
from typing import Any

Script = list[tuple[str, dict[str, Any], str]]  # (type, data, tool_call_id)
TOOLS = ("search_web", "fetch_page", "query_crm", "send_email", "refund_payment", "write_file")
COMPACT_EVERY = 40


def _call_hash(tool: str, turn: int) -> str:
    return hashlib.blake2s(f"{tool}:{turn}".encode(), digest_size=8).hexdigest()


def _tool_turn(step: str, turn: int, tc_prefix: str) -> Script:
    tool = TOOLS[turn % len(TOOLS)]
    tc = f"{tc_prefix}{turn}"
    args = {"query": f"{step} item {turn}", "limit": 10}
    usage = {"tokens": 900 + turn % 300, "cost_micros": 1800 + turn % 500}
    reply = {
        "turn": turn, "step": step, "text": f"Looking up {step} item {turn}.",
        "calls": [{"id": tc, "name": tool, "args": args}],
        "usage": usage, "call_hashes": [_call_hash(tool, turn)], "no_progress": 0,
    }
    result = {
        "id": tc, "status": "succeeded",
        "summary": f"{tool} returned 3 records for {step} item {turn}; totals attached as facts.",
        "facts": {"records": 3, "total_cents": 1000 + turn, "ids": [turn, turn + 1, turn + 2]},
    }
    return [
        ("model.requested", {"turn": turn, "step": step}, ""),
        ("model.replied", reply, ""),
        ("tool.result", result, tc),
    ]


def _closing_turn(step: str, turn: int) -> Script:
    reply = {"turn": turn, "step": step, "text": f"{step} done.", "calls": [],
             "usage": {"tokens": 400, "cost_micros": 700}}
    return [("model.requested", {"turn": turn, "step": step}, ""), ("model.replied", reply, "")]


def _step_events(index: int, first_turn: int, tc_prefix: str) -> tuple[Script, int]:
    step = f"s{index}"
    out: Script = [("step.started", {"step": step}, "")]
    turn = first_turn
    for _ in range(2 + index % 4):
        turn += 1
        out += _tool_turn(step, turn, tc_prefix)
        if turn % COMPACT_EVERY == 0:
            summary = f"Turns up to {turn - 8} covered {step} and earlier steps."
            out.append(("context.compacted", {"upto_turn": turn - 8, "summary": summary}, ""))
    turn += 1
    out += _closing_turn(step, turn)
    out.append(("step.completed", {"step": step, "output": {"ok": True, "turns": turn}}, ""))
    return out, turn


def _ending(final: dict[str, Any], turn: int, tc_prefix: str) -> Script:
    status = final["status"]
    if status == "running":
        return []
    data = {"from": "running", "to": status, "reason": final.get("reason", ""),
            "detail": final.get("detail", "")}
    out: Script = []
    if status == "waiting":
        wait = {"kind": final["wait_kind"], "until": final.get("wait_until"),
                "data": final.get("wait_data", {})}
        out.append(("wait.started", wait, ""))
    elif status == "unknown":
        out.append(("tool.unknown", {"id": f"{tc_prefix}{turn}"}, f"{tc_prefix}{turn}"))
    return [*out, ("run.status", data, "")]


def run_script(n: int, *, final: dict[str, Any], tc_prefix: str = "tc_x_") -> Script:
    """Return exactly ``n`` (>= 3) events of a run ending in ``final`` (status, reason...).

    The first event (run.created) carries a placeholder plan; callers that know the agent and
    goal replace it with ``created_event``.
    """
    if n < 3:
        raise ValueError(f"a run script needs at least 3 events, got {n}")
    ending = _ending(final, 0, tc_prefix)
    room = n - 2 - len(ending)
    body: Script = []
    index, turn = 0, 0
    while len(body) < room:
        index += 1
        events, turn = _step_events(index, turn, tc_prefix)
        body += events
    body = body[:room]
    steps = sum(1 for e in body if e[0] == "step.started")
    ending = _ending(final, turn, tc_prefix)
    head: Script = [
        created_event(agent="agent", goal="goal", steps=max(steps, 1)),
        ("run.status", {"from": "queued", "to": "running", "owner": "worker-1"}, ""),
    ]
    return head + body + ending


def created_event(*, agent: str, goal: str, steps: int) -> tuple[str, dict[str, Any], str]:
    """Return the run.created event of a run of ``agent`` with a plan of ``steps`` steps."""
    plan = [{"key": f"s{i}", "title": f"Step {i}"} for i in range(1, steps + 1)]
    data = {"agent": agent, "version": "1", "goal": goal, "input": {"ticket": 42},
            "constraints": ["stay within budget"], "plan": plan}
    return ("run.created", data, "")


def script_totals(script: Script) -> dict[str, int]:
    """Return the projection counters a run with this log would show."""
    totals = {"steps_total": 0, "steps_done": 0, "tokens": 0, "cost": 0, "models": 0, "tools": 0}
    for kind, data, _ in script:
        if kind == "run.created":
            totals["steps_total"] = len(data.get("plan", []))
        elif kind == "step.completed":
            totals["steps_done"] += 1
        elif kind == "model.replied":
            totals["models"] += 1
            totals["tokens"] += data["usage"]["tokens"]
            totals["cost"] += data["usage"]["cost_micros"]
        elif kind == "tool.result":
            totals["tools"] += 1
    return totals


def as_events(script: Script) -> list[dict[str, Any]]:
    """Return the script as the event dicts ``reducer.fold`` takes (seq from 1)."""
    return [
        {"seq": i, "type": kind, "data": data, "tool_call_id": tc, "attempt": None}
        for i, (kind, data, tc) in enumerate(script, start=1)
    ]
