"""Agents the engine benchmarks run: a scripted model asking for one no-op tool per turn."""
from __future__ import annotations

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptContext, ScriptedModel, call, say
from agentops.llm.protocol import ModelReply, ToolCallRequest, Usage
from agentops.tools import ToolResult, tool

PAD = "x" * 500


@tool(effect="read")
def noop(ctx, i: int) -> ToolResult:
    """Do nothing, durably."""
    return ToolResult(facts={"i": i}, summary="ok")


@tool(effect="read")
def echo(ctx, i: int) -> ToolResult:
    """Return a 500-byte message."""
    return ToolResult(facts={"i": i}, summary=PAD)


def _noop_script(ctx: ScriptContext) -> ModelReply:
    steps = int(ctx.input.get("steps", 10))
    return call("noop", i=ctx.turn) if ctx.turn <= steps else say("done")


def _chatty_script(ctx: ScriptContext) -> ModelReply:
    steps = int(ctx.input.get("steps", 200))
    if ctx.turn > steps:
        return say("done")
    return ModelReply(text=PAD, tool_calls=(ToolCallRequest("echo", {"i": ctx.turn}),),
                      usage=Usage(50, 10), finish_reason="tool_calls")


registry.register(Agent(name="bench-noop", version="1", system_prompt="Benchmark.", tools=[noop],
                        plan=[StepSpec("s")], model=lambda: ScriptedModel(_noop_script),
                        max_turns_per_step=100_000))
registry.register(Agent(name="bench-chatty", version="1", system_prompt="Benchmark.",
                        tools=[echo], plan=[StepSpec("s")],
                        model=lambda: ScriptedModel(_chatty_script, context_window=10_000_000),
                        max_turns_per_step=100_000))


@tool(effect="read")
def slow_step(ctx, i: int) -> ToolResult:
    """Take a fifth of a second (a step long enough to kill a worker in the middle of it)."""
    import time

    time.sleep(0.2)
    return ToolResult(facts={"i": i}, summary="ok")


def _slow_script(ctx: ScriptContext) -> ModelReply:
    steps = int(ctx.input.get("steps", 100))
    return call("slow_step", i=ctx.turn) if ctx.turn <= steps else say("done")


registry.register(Agent(name="bench-slow", version="1", system_prompt="Benchmark.",
                        tools=[slow_step], plan=[StepSpec("s")],
                        model=lambda: ScriptedModel(_slow_script), max_turns_per_step=100_000))


# The model the settings configure (agentops.llm.configured: one client per process), which
# bench.model_server.model_env() points at a local bench.model_server.
registry.register(Agent(name="bench-remote", version="1", system_prompt="Benchmark.",
                        tools=[noop], plan=[StepSpec("s")],
                        max_turns_per_step=100_000))
