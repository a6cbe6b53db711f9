"""What an operator action leaves the run facing: the write steps next, the exceptions it carries.

Read-only (a selector): the skip and rollback confirm dialogs show it before anyone presses.
"""
from __future__ import annotations

from typing import Any

from agentops.agents import registry
from agentops.errors import AgentOpsError
from runs.engine.runtime.exceptions import exception_what, exceptions_resolve
from runs.engine.runtime.snapshots import load_state
from runs.errors import UnknownAgent
from runs.models import Run
from runs.services_operator.rollback import rollback_plan

_DONE = ("succeeded", "skipped")


def action_outlook(*, run: Run, verb: str, to_seq: int | None = None) -> dict[str, Any]:
    """Return {"next_steps", "exceptions"} after ``verb`` (skip or rollback) on ``run``."""
    state = load_state(run)
    carried = exceptions_resolve(run.pk, state.get("exceptions", []))
    after, added = state, []
    if verb == "skip":
        step = state["current_step"] or ""
        added.append({"kind": "step_skipped", "step": step, "by": "you"})
        skipped = {step}
    elif verb in ("rollback", "rollback_terminate"):
        after, added, skipped = _rollback_view(run, to_seq)
        if verb == "rollback_terminate":  # it ends the run: no step runs next
            return {"next_steps": [], "exceptions": carried + _said(added)}
    else:
        return {"next_steps": [], "exceptions": carried}
    return {"next_steps": _next_steps(run, after, skipped), "exceptions": carried + _said(added)}


def _said(added: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**a, "what": exception_what(a), "who": "you", "when": "on confirm",
             "why": "the reason you give"} for a in added]


def _rollback_view(run: Run, to_seq: int | None) -> tuple[dict[str, Any], list[dict], set]:
    try:
        plan = rollback_plan(run=run, to_seq=to_seq)
    except AgentOpsError:
        return load_state(run), [{"kind": "rolled_back"}], set()
    added = [{"kind": "compensated", "tool": c.tool, "tool_call_id": c.tool_call_id}
             for c in plan.compensate]
    return plan.state, [*added, {"kind": "rolled_back"}], set()


def _next_steps(run: Run, state: dict[str, Any], skipped: set[str]) -> list[dict[str, Any]]:
    try:
        agent = registry.get(run.agent_name, run.agent_version)
    except UnknownAgent:
        agent = None
    out = []
    for p in state["plan"]:
        if p["key"] in skipped or state["steps"].get(p["key"], {}).get("status") in _DONE:
            continue
        tools = (p.get("completion") or {}).get("tools", [])
        writes = [t for t in tools if agent is not None and agent.tool(t) is not None
                  and agent.tool(t).is_write]
        out.append({"key": p["key"], "title": p["title"], "writes": writes,
                    "declared": bool(p.get("completion"))})
    return out
