"""Agents for the deadline tests: a refund (reversible), an email (irreversible), a wait.

Worker processes import this module (AGENTOPS_AGENTS=tests.deadline_agents); what the tools
did is read from the ledger, which every process shares.
"""
from __future__ import annotations

from agentops.agents import Agent, Budget, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, WaitForSignal, tool


def _undo_refund(ctx, facts, order: str) -> ToolResult:
    return ToolResult(facts={"refund_reversed": order}, summary=f"refund of {order} reversed")


@tool(effect="write", idempotent=True, compensate=_undo_refund, reversibility="reversible")
def refund(ctx, order: str) -> ToolResult:
    """Refund an order (a compensation reverses it)."""
    return ToolResult(facts={"refunded": order, "amount": 40}, summary=f"refunded {order}")


@tool(effect="write", reversibility="irreversible")
def email(ctx, to: str) -> ToolResult:
    """Email the customer (nothing can take it back)."""
    return ToolResult(facts={"emailed": to}, summary=f"emailed {to}")


@tool(effect="read")
def await_carrier(ctx, ref: str) -> ToolResult:
    """Wait for the carrier's pickup signal."""
    raise WaitForSignal("pickup")


SCRIPT = {"refund": [call("refund", order="A-1"), say("refunded")],
          "notify": [call("email", to="c@example.com"), say("sent")],
          "pickup": [call("await_carrier", ref="R-1"), say("picked up")]}


def register(name: str, *, seconds: int | None, on_deadline: str = "") -> Agent:
    """Register (once) an agent that refunds, emails, then waits for the carrier."""
    if registry.has(name, "1"):
        return registry.get(name, "1")
    return registry.register(Agent(
        name=name, version="1", system_prompt="You handle returns.",
        tools=[refund, email, await_carrier], plan=[StepSpec(k) for k in SCRIPT],
        model=lambda: ScriptedModel(SCRIPT),
        budget=Budget(seconds=seconds, on_deadline=on_deadline)))


register("deadline-e2e", seconds=15, on_deadline="terminate")
