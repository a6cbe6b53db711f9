"""Agents as a new author writes them, mistakes included (the author-mistakes tests).

Worker processes import this module (AGENTOPS_AGENTS=tests.author_agents). ``author_good``
reads and says done; ``author_lazy``'s tool imports a dependency that is not installed only
when it runs (a lazily imported SDK), so the module imports fine and only that agent's runs
break; ``author_refused`` calls a tool that does not exist and then gives up.
"""
from __future__ import annotations

import importlib

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool


@tool(effect="read")
def lookup(ctx, item: str) -> ToolResult:
    """Look an item up."""
    return ToolResult(facts={"item": item}, summary=f"{item} found")


@tool(effect="read")
def lookup_remote(ctx, item: str) -> ToolResult:
    """Look an item up in the supplier's system (its SDK is imported when first used)."""
    sdk = importlib.import_module("agentops_missing_supplier_sdk")
    return ToolResult(facts={"item": sdk.find(item)}, summary="found")


@tool(effect="write", idempotent=True)
def place_order(ctx, item: str, quantity: int) -> ToolResult:
    """Place an order with the supplier."""
    return ToolResult(facts={"ordered": item, "quantity": quantity}, summary="ordered")


registry.register(Agent(
    name="author_good", version="1", system_prompt="Look it up.", tools=[lookup],
    plan=[StepSpec("look")],
    model=lambda: ScriptedModel({"look": [call("lookup", item="bolts"), say("done")]})))
registry.register(Agent(
    name="author_lazy", version="1", system_prompt="Look it up remotely.",
    tools=[lookup_remote], plan=[StepSpec("look")],
    model=lambda: ScriptedModel({"look": [call("lookup_remote", item="bolts"), say("done")]})))
registry.register(Agent(
    name="author_refused", version="1", system_prompt="Order bolts.",
    tools=[lookup, place_order], plan=[StepSpec("order")],
    model=lambda: ScriptedModel({"order": [call("place_ordr", item="bolts", quantity=3),
                                           say("I could not place the order.")]})))


@tool(effect="write", approval="always")
def refund(ctx, order: str) -> ToolResult:
    """Refund an order (a person approves first)."""
    return ToolResult(facts={"refunded": order}, summary="refunded")


@tool(effect="write")
def place_order_raw(ctx, item: str) -> ToolResult:
    """Place an order through the supplier's API (no key, no probe)."""
    raise TimeoutError("supplier API timed out after the order was sent")


registry.register(Agent(
    name="author_approval", version="1", system_prompt="Refund it.", tools=[refund],
    plan=[StepSpec("refund")],
    model=lambda: ScriptedModel({"refund": [call("refund", order="o-1"), say("done")]})))
registry.register(Agent(
    name="author_unknown", version="1", system_prompt="Order it.", tools=[place_order_raw],
    plan=[StepSpec("order")],
    model=lambda: ScriptedModel({"order": [call("place_order_raw", item="bolts"),
                                           say("done")]})))
