"""What a settled event means for a run's outcome: step completion marks and exceptions.

Pure helpers of ``runs.engine.core.reducer`` (no I/O): a step's succeeded tools and fact keys, the
tools a person rejected, the results kept out of the context, and the exceptions a run will end with (``runs.engine.runtime.exceptions``
turns them into the Run's list).
"""
from __future__ import annotations

import difflib
import json
from typing import Any


def step_outcome(state: dict[str, Any], e: dict[str, Any], call: dict[str, Any],
                 d: dict[str, Any]) -> None:
    """Note what a settled call means for its step's declared completion (and exceptions)."""
    step = state["steps"].get(call["step"])
    status = d.get("status")
    if step is not None:
        _refusals_note(step, e, call, d)
    if step is not None and status in ("succeeded", "confirmed_executed"):
        if call["name"] not in step.setdefault("tools_ok", []):
            step["tools_ok"].append(call["name"])
        # Sorted: PostgreSQL's jsonb reorders keys, and replay must equal the live state.
        step["fact_keys"] = sorted({*step.get("fact_keys", ()), *(d.get("facts") or {})})
        if not d.get("deduplicated"):
            _count_note(state, step, call["step"], d.get("facts") or {})
    if status == "rejected":
        error = d.get("error") or {}
        if step is not None:
            step.setdefault("rejected", {})[call["name"]] = error.get("message", "")
        expired = error.get("category") == "approval_expired"
        kind = "approval_expired" if expired else "approval_rejected"
        exception_note(state, e, kind, step=call["step"], tool=call["name"],
                       tool_call_id=d["id"], by=error.get("by", ""),
                       why=error.get("message", ""))


def _count_note(state: dict[str, Any], step: dict[str, Any], key: str,
                facts: dict[str, Any]) -> None:
    """Add a fresh success's facts to the totals its step's ``requires_count`` declares.

    A list fact counts the items not counted before (the same document saved by a second
    call is one document), and its items are kept so what is still missing can be named.
    """
    for plan in state["plan"]:
        if plan["key"] == key:
            break
    else:
        return  # a step no longer in the plan declares no counts
    for fact in (plan.get("completion") or {}).get("counts", {}):
        value = facts.get(fact)
        if isinstance(value, list):
            seen = step.setdefault("count_items", {}).setdefault(fact, [])
            fresh = list(dict.fromkeys(k for k in map(count_item, value) if k not in seen))
            seen.extend(fresh)
            n = len(fresh)
        else:
            n = value if isinstance(value, int) and not isinstance(value, bool) else 0
        if n:
            counts = step.setdefault("counts", {})
            counts[fact] = counts.get(fact, 0) + n


def count_item(value: Any) -> str:
    """Return how one item of a counted list fact is kept and compared (text, or its JSON)."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


KEPT_OUT = 50  # results listed by id in the state (older ones stay expandable by id)


def kept_out_note(state: dict[str, Any], call_id: str, tool: str, summary: str) -> None:
    """List a result stored whole out of the context, by id with its summary (bounded)."""
    kept = state.setdefault("kept_out", {})
    kept[call_id] = {"tool": tool, "summary": summary[:300]}
    for old in list(kept)[:-KEPT_OUT]:
        del kept[old]


def exception_note(state: dict[str, Any], e: dict[str, Any], kind: str, **fields: Any) -> None:
    """Record something that keeps the run from a clean success (the seq dates it)."""
    state.setdefault("exceptions", []).append({"kind": kind, "seq": e["seq"], **fields})


def _refusals_note(step: dict[str, Any], e: dict[str, Any], call: dict[str, Any],
                   d: dict[str, Any]) -> None:
    """Keep the step's refused calls until a call of that tool succeeds in the step.

    A refused call (an unknown tool, a missing argument) made nothing happen; the step may
    not end clean while the model gave up on it. A later success of the tool answers it; for
    an unknown name, a success of a tool with a close name (a misspelling) does.
    """
    refused = step.get("refused")
    if d.get("refused"):
        error = d.get("error") or {}
        step.setdefault("refused", {})[d["id"]] = {
            "tool": call["name"], "why": error.get("message", ""), "seq": e["seq"]}
    elif refused and d.get("status") in ("succeeded", "confirmed_executed"):
        for cid, item in list(refused.items()):
            if item["tool"] == call["name"] or difflib.get_close_matches(
                    item["tool"], [call["name"]], n=1, cutoff=0.8):
                del refused[cid]


def refusals_open(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Return an exception item per refused call that no later success of its tool answered."""
    out = []
    for key, step in state["steps"].items():
        for cid, item in (step.get("refused") or {}).items():
            out.append({"kind": "refused_call", "step": key, "tool": item["tool"],
                        "tool_call_id": cid, "seq": item["seq"], "why": item["why"]})
    return sorted(out, key=lambda i: i["seq"])
