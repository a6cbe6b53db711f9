"""An agent whose tools handle a secret PIN: sealed, echoed in every output, logged, undone.

The tools are careless on purpose: they put the PIN in their facts, summary, log artifact,
error messages and log lines, so a test can check none of it is stored or shown.
"""
from __future__ import annotations

import logging
from typing import Any

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool

logger = logging.getLogger("tests.secret_agents")
# What the tools really received (the clear PIN must reach them).
received: list[dict[str, Any]] = []


def _relock(ctx, facts, door: str, pin: str) -> ToolResult:
    received.append({"tool": "relock", "door": door, "pin": pin})
    logger.warning("relocking %s with pin %s", door, pin)
    return ToolResult(facts={"relocked": door, "echo": f"relocked with {pin}"})


@tool(effect="write", idempotent=True, reversibility="reversible", approval="always",
      sensitive=("pin",), compensate=_relock)
def unlock(ctx, door: str, pin: str) -> ToolResult:
    """Unlock a door with a PIN (a person approves every unlock)."""
    received.append({"tool": "unlock", "door": door, "pin": pin})
    logger.warning("unlocking %s with pin %s", door, pin)
    return ToolResult(facts={"door": door, "echo": f"opened with pin {pin}", "pin": pin},
                      summary=f"door {door} opened with {pin}",
                      log=f"POST /doors/{door}/unlock pin={pin} -> 200\n" * 400)


@tool(effect="read", sensitive=("pin",))
def check_pin(ctx, pin: str) -> ToolResult:
    """Check a PIN; fails, naming the PIN in its error."""
    received.append({"tool": "check_pin", "pin": pin})
    raise ValueError(f"pin {pin} is locked out")


@tool(effect="read")
def note(ctx, text: str) -> ToolResult:
    """Write a note (no sensitive arguments: the model passes the PIN on anyway)."""
    received.append({"tool": "note", "text": text})
    return ToolResult(facts={"noted": text}, summary=f"noted: {text}")


def pin_agent(name: str, pin: str, *, with_errors: bool = False) -> Agent:
    """Register an agent that unlocks with ``pin``, notes it, says it, and finishes."""
    script: dict[str, list[Any]] = {
        "open": [call("unlock", door="d1", pin=pin), say(f"opened d1 using {pin}")],
        "log": [call("note", text=f"pin was {pin}"), say("noted")],
    }
    plan = ["open", "log"]
    if with_errors:
        script["check"] = [call("check_pin", pin=pin), say(f"check of {pin} failed; fine")]
        plan.append("check")
    agent = Agent(name=name, version="1", system_prompt="You open doors.",
                  tools=[unlock, check_pin, note], plan=[StepSpec(k) for k in plan],
                  model=lambda: ScriptedModel(script))
    return registry.register(agent)
