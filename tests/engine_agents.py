"""Agents and an in-memory outside world for engine tests.

The World records every side effect with its idempotency key, so a test can see whether a
write happened twice. Faults are injected per test by setting attributes on the world.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, calls, say
from agentops.tools import ToolResult, tool
from ledger.errors import ToolTimeout


@dataclass
class World:
    """Side effects that happened, and the faults to inject next."""

    effects: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    fail_next: dict[str, list[BaseException]] = field(default_factory=dict)
    timeout_after_effect: set[str] = field(default_factory=set)

    def fault(self, tool_name: str) -> None:
        queue = self.fail_next.get(tool_name) or []
        if queue:
            raise queue.pop(0)

    def did(self, tool_name: str, key: str, args: dict[str, Any]) -> None:
        self.effects.append((tool_name, key, args))

    def count(self, tool_name: str) -> int:
        return sum(1 for t, _, _ in self.effects if t == tool_name)


world = World()


@tool(effect="read")
def lookup(ctx, item: str) -> ToolResult:
    """Look an item up."""
    world.fault("lookup")
    return ToolResult(facts={"item": item, "price": 42}, summary=f"{item} costs 42")


@tool(effect="write", idempotent=True)
def charge(ctx, amount: int) -> ToolResult:
    """Charge a card (idempotent by key)."""
    if not any(k == ctx.idempotency_key for t, k, _ in world.effects if t == "charge"):
        world.did("charge", ctx.idempotency_key, {"amount": amount})
    if "charge" in world.timeout_after_effect:
        world.timeout_after_effect.discard("charge")
        raise ToolTimeout("charge timed out")
    world.fault("charge")
    return ToolResult(facts={"charged": amount}, summary=f"charged {amount}")


def _probe_ship(ctx, order: str) -> ToolResult | None:
    for t, k, a in world.effects:
        if t == "ship" and k == ctx.idempotency_key:
            return ToolResult(facts={"shipped": a["order"]}, summary="shipped (probed)")
    return None


@tool(effect="write", probe=_probe_ship, reversibility="manual")
def ship(ctx, order: str) -> ToolResult:
    """Ship an order (not idempotent, but probeable)."""
    world.fault("ship")
    world.did("ship", ctx.idempotency_key, {"order": order})
    if "ship" in world.timeout_after_effect:
        world.timeout_after_effect.discard("ship")
        raise ToolTimeout("ship timed out")
    return ToolResult(facts={"shipped": order}, summary=f"shipped {order}")


@tool(effect="write", reversibility="irreversible")
def email(ctx, to: str) -> ToolResult:
    """Send an email (no key, no probe: unsafe to repeat)."""
    world.fault("email")
    world.did("email", ctx.idempotency_key, {"to": to})
    if "email" in world.timeout_after_effect:
        world.timeout_after_effect.discard("email")
        raise ToolTimeout("email timed out")
    return ToolResult(facts={"sent_to": to}, summary=f"emailed {to}")


@tool(effect="read")
def partial(ctx, item: str) -> ToolResult:
    """Return a partial record."""
    return ToolResult(facts={"item": item}, summary="partial", missing_fields=("price", "stock"))


@tool(effect="read")
def big(ctx, n: int) -> ToolResult:
    """Return a large result."""
    rows = [{"i": i, "text": "x" * 50} for i in range(n)]
    return ToolResult(facts={"count": n, "rows": rows}, summary=f"{n} rows", log="raw " * 1000)


@tool(effect="read")
def poll(ctx, ref: str) -> ToolResult:
    """Check a status that never changes."""
    return ToolResult(facts={"state": "pending"}, summary="still pending")


TOOLS = [lookup, charge, ship, email, partial, big, poll]

MIXED_SCRIPT = {
    "quote": [call("lookup", item="book"), say("quoted")],
    "pay": [call("charge", amount=42), say("paid")],
    "ship": [call("ship", order="o-1"), say("shipped")],
    "notify": [call("email", to="a@example.com"), say("notified")],
}


def make_agent(name: str, script: Any, plan: list[str] | None = None, **kw: Any) -> Agent:
    """Register and return a scripted agent with the test tools."""
    steps = None if plan is None else [StepSpec(k, depends_on=()) for k in plan]
    agent = Agent(name=name, version="1", system_prompt="You are a test agent.", tools=TOOLS,
                  plan=steps, model=lambda: ScriptedModel(script), **kw)
    return registry.register(agent)


__all__ = ["World", "world", "make_agent", "MIXED_SCRIPT", "call", "calls", "say"]
