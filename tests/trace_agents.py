"""An agent whose run has a model call, a retried tool call and a call its worker dies in.

Worker processes import this module (AGENTOPS_AGENTS) for the trace tests.
"""
from __future__ import annotations

import time

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool


def _note(marker: str, line: str) -> None:
    with open(marker, "a") as out:
        out.write(line + "\n")


@tool(effect="read", retry=3)
def flaky_lookup(ctx, marker: str) -> ToolResult:
    """A lookup whose connection drops on its first attempt."""
    _note(marker, f"flaky {ctx.attempt}")
    if ctx.attempt == 1:
        raise ConnectionError("lookup connection dropped")
    return ToolResult(facts={"found": True}, summary="found it")


@tool(effect="read")
def slow_read(ctx, marker: str) -> ToolResult:
    """A read that hangs on its first attempt (the test kills its worker there)."""
    _note(marker, f"slow {ctx.attempt}")
    if ctx.attempt == 1:
        time.sleep(3600)
    return ToolResult(facts={"attempt": ctx.attempt}, summary=f"read on attempt {ctx.attempt}")


def _register() -> None:
    registry.register(Agent(
        name="tr_traced", version="1", system_prompt="Look it up, then read it.",
        tools=[flaky_lookup, slow_read], plan=[StepSpec("work")],
        model=lambda: ScriptedModel({"work": [
            lambda sc: call("flaky_lookup", marker=sc.input["marker"]),
            lambda sc: call("slow_read", marker=sc.input["marker"]),
            say("looked up and read")]})))


_register()
