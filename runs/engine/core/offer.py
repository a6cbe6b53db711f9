"""Which tools a model turn offers, and whether it forces one (ModelOptions.tool_choice).

Pure: reads the run's state, the agent and the model's options. With ``tool_choice=
"required"`` a step's first turn (and, after a failed call, turns up to ``force_turns``)
forces a tool call, naming the tool when the step offers exactly one; later turns offer no
tools, so the model answers in text and the step ends. This is how small local models, which
never call a tool unprompted, still work a plan.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentops.llm.protocol import ModelOptions

if TYPE_CHECKING:  # the core only annotates with it; agents pulls in model clients
    from agentops.agents import Agent


# The engine's own tools (ledger.services.paging, .expand): offered with a step's named tools
# unless the step names some of them itself (then only those).
BUILT_IN = ("next_page", "expand_result")


def tool_offer(state: dict[str, Any], step: str, agent: Agent, options: ModelOptions,
               tools: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str | None]:
    """Return (tools to send, tool_choice) for the next turn of ``step``."""
    offered = step_tools(state, step, tools)
    if options.tool_choice != "required" or not offered:
        return offered, None
    turn = state["steps"].get(step, {}).get("turns", 0) + 1
    if turn == 1 or (turn <= options.force_turns and _last_call_failed(state, step)):
        if len(offered) == 1:
            return offered, offered[0]["function"]["name"]
        return offered, "required"
    return [], None


def step_tools(state: dict[str, Any], step: str,
               tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the tools ``step`` offers: those its StepSpec names, else all of them."""
    entry = next((p for p in state["plan"] if p["key"] == step), None)
    names = (entry or {}).get("tools") or ()
    if not names:
        return tools
    return [t for t in tools if t["function"]["name"] in names
            or t["function"]["name"] in BUILT_IN and not (set(names) & set(BUILT_IN))]


def _last_call_failed(state: dict[str, Any], step: str) -> bool:
    """Return True when the latest turn of ``step`` had a call that did not succeed."""
    for turn in reversed(state["turns"]):
        if turn["step"] == step:
            return any((c.get("result") or {}).get("status") != "succeeded"
                       for c in turn["calls"])
    return False
