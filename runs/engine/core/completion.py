"""Step completion: what a step declared must be true before it counts as done.

A plan step may declare tools that must have succeeded in it, fact keys its successful calls
must have returned, and a JSON schema for the model's final answer (agentops.agents.StepSpec).
The engine asks ``step_unmet`` when the model stops calling tools; what is missing is told
to the model (``missing_fields``) and, once the step's turns are used, it blocks the run.
Pure: reads the reduced state only.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from runs.engine.core.outcome_state import count_item


@dataclass
class Unmet:
    """What a step still lacks: the fields the model is told, and the sentence a person reads."""

    missing_fields: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)  # required tool -> rejection
    short: list[dict[str, Any]] = field(default_factory=list)  # counts not reached

    def __bool__(self) -> bool:
        return bool(self.missing_fields)

    def detail(self, step: str) -> str:
        """Return why the step is not done, e.g. "step refund ended without a successful ..."."""
        return f"step {step} ended " + "; ".join(self.reasons)


def step_completion(state: dict[str, Any], step: str) -> dict[str, Any]:
    """Return the completion ``step`` declared ({} when it declared none)."""
    for plan_step in state["plan"]:
        if plan_step["key"] == step:
            return plan_step.get("completion") or {}
    return {}


def step_unmet(state: dict[str, Any], step: str, final_text: str,
               offered: Sequence[str] = ()) -> Unmet:
    """Return what ``step`` still lacks for its declared completion (falsy when it is done).

    ``offered``: the tools the step offers. A step offering one tool, with a refused call
    (an unknown tool, a missing argument) and no success of that tool, is not done either:
    the model gave up on the one thing the step is for.
    """
    done = step_completion(state, step)
    st = state["steps"].get(step, {})
    out = Unmet()
    ok, rejected = st.get("tools_ok", []), st.get("rejected", {})
    for tool in done.get("tools", []):
        if tool in ok:
            continue
        if tool in rejected:
            out.rejected[tool] = rejected[tool]
            if done.get("allow_rejection"):
                continue
            out.reasons.append(f"without a successful {tool} (rejected: {rejected[tool]})")
        else:
            out.reasons.append(f"without a successful {tool}")
        out.missing_fields.append(f"tool:{tool}")
    keys = st.get("fact_keys", [])
    lacking = [k for k in done.get("facts", []) if k not in keys]
    if lacking:
        out.missing_fields.extend(f"fact:{k}" for k in lacking)
        out.reasons.append(f"without the facts {', '.join(lacking)}")
    if done.get("output_schema") is not None:
        _check_output(done["output_schema"], final_text, out)
    _check_counts(state, done.get("counts") or {}, st.get("counts") or {}, out,
                  st.get("count_items") or {})
    _only_tool_refused(st, offered, out)
    return out


def count_short_only(unmet: Unmet) -> bool:
    """Return True when all a step lacks is counts it declared (it did part of its work)."""
    return bool(unmet.short) and all(f.startswith("count:") for f in unmet.missing_fields)


def _check_counts(state: dict[str, Any], counts: dict[str, Any], got: dict[str, int],
                  out: Unmet, items: dict[str, list[str]]) -> None:
    for key, need in counts.items():
        target, source = _count_target(state, need)
        if got.get(key, 0) >= target > 0:
            continue
        out.missing_fields.append(f"count:{key}")
        if target <= 0:
            out.reasons.append(f"without a count to reach for {key}: {source}")
            out.short.append({"key": key, "got": got.get(key, 0), "need": 0, "why": source})
            continue
        missing = _missing_items(state, need, items.get(key, []))
        named = _named(missing)
        out.reasons.append(f"with {key} at {got.get(key, 0)} of {target} ({source}){named}")
        out.short.append({"key": key, "got": got.get(key, 0), "need": target,
                          "missing": missing[:MISSING_NAMED], "missing_count": len(missing),
                          "why": f"{key} reached {got.get(key, 0)} of {target} ({source})"
                                 f"{named}"})


MISSING_NAMED = 20  # items of a short count named in its reason and exception


def _missing_items(state: dict[str, Any], need: Any, seen: list[str]) -> list[str]:
    """Return the items of the input list ``need`` names that no success returned, in order."""
    run_input = state["run"].get("input") or {}
    wanted = run_input.get(need) if isinstance(need, str) and isinstance(run_input, dict) \
        else None
    if not isinstance(wanted, list):
        return []
    have = set(seen)
    return [k for k in dict.fromkeys(map(count_item, wanted)) if k not in have]


def _named(missing: list[str]) -> str:
    if not missing:
        return ""
    more = len(missing) - MISSING_NAMED
    return f"; missing: {', '.join(missing[:MISSING_NAMED])}" + (
        f" and {more} more" if more > 0 else "")


def _count_target(state: dict[str, Any], need: Any) -> tuple[int, str]:
    """Return (the count to reach, where it came from) for a declared ``requires_count``."""
    if isinstance(need, int):
        return need, "declared by the step"
    run_input = state["run"].get("input") or {}
    value = run_input.get(need) if isinstance(run_input, dict) else None
    if isinstance(value, list):
        return len(value), f"the {len(value)} items of input {need}"
    if isinstance(value, int) and not isinstance(value, bool):
        return value, f"input {need}"
    return 0, f"the run's input has no number or list {need!r}"


def _only_tool_refused(st: dict[str, Any], offered: Sequence[str], out: Unmet) -> None:
    refused = list((st.get("refused") or {}).values())
    if len(offered) != 1 or not refused or offered[0] in st.get("tools_ok", []) \
            or f"tool:{offered[0]}" in out.missing_fields:
        return
    why = "; ".join(f"{r['tool']}: {r['why']}" for r in refused)
    out.missing_fields.append(f"tool:{offered[0]}")
    out.reasons.append(f"without a successful {offered[0]} (refused: {why})")


def step_output(state: dict[str, Any], step: str, final_text: str) -> dict[str, Any] | None:
    """Return the step's final answer as JSON when it declared an output schema, else None."""
    if step_completion(state, step).get("output_schema") is None:
        return None
    try:
        value = json.loads(final_text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def rejection_only(unmet: Unmet) -> bool:
    """Return True when all that is missing are tools a person rejected (asking is no use)."""
    tools = [f.removeprefix("tool:") for f in unmet.missing_fields if f.startswith("tool:")]
    return bool(tools) and len(tools) == len(unmet.missing_fields) and all(
        t in unmet.rejected for t in tools)


def _check_output(schema: dict[str, Any], text: str, out: Unmet) -> None:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        required = schema.get("required") or ["output"]
        out.missing_fields.extend(f"output:{k}" for k in required)
        out.reasons.append("without a final answer in JSON fitting its output schema")
        return
    errors = list(jsonschema.validators.validator_for(schema)(schema).iter_errors(value))
    if not errors:
        return
    names = []
    for err in errors:
        if err.validator == "required":
            names += [f"output:{k}" for k in schema.get("required", []) if k not in value]
        else:
            names.append("output:" + ("/".join(str(p) for p in err.absolute_path) or "(top)"))
    out.missing_fields.extend(dict.fromkeys(names))
    out.reasons.append("with a final answer that does not fit its output schema: "
                       + jsonschema.exceptions.best_match(errors).message)
