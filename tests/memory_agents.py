"""Agents for the memory-budget tests: a tool whose results grow until the run's share is used.

Worker processes import this module (AGENTOPS_AGENTS=tests.memory_agents). ``grow`` really
allocates what it returns (a text log of ``kib`` KiB), so the sizes the budget weighs are the
memory the process holds.
"""
from __future__ import annotations

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool

SIZES_KIB = [2 ** k for k in range(6, 19)]  # 64 KiB .. 256 MiB, doubling


@tool(effect="read")
def grow(ctx, kib: int) -> ToolResult:
    """Return a report of ``kib`` KiB (each call asks for a bigger one)."""
    return ToolResult(facts={"kib": kib}, summary=f"a report of {kib} KiB",
                      log="x" * (kib * 1024))


def _grower() -> ScriptedModel:
    return ScriptedModel({"grow": [call("grow", kib=k) for k in SIZES_KIB] + [say("done")]})


def _small() -> ScriptedModel:
    return ScriptedModel({"grow": [call("grow", kib=1), say("done")]})


registry.register(Agent(name="mem_grower", version="1", system_prompt="Read ever larger reports.",
                        tools=[grow], plan=[StepSpec("grow")], model=_grower,
                        max_turns_per_step=len(SIZES_KIB) + 2))
registry.register(Agent(name="mem_small", version="1", system_prompt="Read one small report.",
                        tools=[grow], plan=[StepSpec("grow")], model=_small))
