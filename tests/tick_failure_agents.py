"""Agents whose ticks raise: worker processes import this module (AGENTOPS_AGENTS).

Each fault sits where an author's or a provider's mistake really would: a model client with
a bug, a probe that returns the wrong thing, no model configured, a provider's garbage (the
model from settings, pointed at a loopback server by the test), a read whose worker dies.
"""
from __future__ import annotations

import time

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.protocol import ModelReply
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool


class BuggyClient:
    """A model client with a bug of its own: it reads a key the provider's answer lacks."""

    context_window = 8192

    def complete(self, **_: object) -> ModelReply:
        """Fail as a hand-written client does when the answer's shape surprises it."""
        answer: dict[str, object] = {"id": "x"}
        return ModelReply(text=str(answer["choices"]))


def _probe_garbage(ctx, order: str) -> str:
    return f"yes, {order} shipped"  # a probe must return a ToolResult, a dict or None


@tool(effect="write", probe=_probe_garbage, reversibility="manual")
def ship_late(ctx, order: str) -> ToolResult:
    """Ship an order; the warehouse answers too late (the outcome is ambiguous)."""
    raise TimeoutError("warehouse did not answer")


@tool(effect="read")
def slow_read(ctx, marker: str) -> ToolResult:
    """A read that writes down its attempt number, then hangs on its first attempt."""
    with open(marker, "a") as out:
        out.write(f"{ctx.tool_call_id} {ctx.attempt}\n")
    if ctx.attempt == 1:
        time.sleep(3600)
    return ToolResult(facts={"attempt": ctx.attempt}, summary=f"attempt {ctx.attempt}")


def _register() -> None:
    one = [StepSpec("answer")]
    registry.register(Agent(name="tf_settings_model", version="1", system_prompt="Say hello.",
                            tools=[], plan=one))
    registry.register(Agent(name="tf_client_bug", version="1", system_prompt="Say hello.",
                            tools=[], plan=one, model=BuggyClient()))
    registry.register(Agent(
        name="tf_probe_garbage", version="1", system_prompt="Ship.", tools=[ship_late],
        plan=[StepSpec("ship")],
        model=lambda: ScriptedModel({"ship": [call("ship_late", order="o1"), say("done")]})))
    registry.register(Agent(
        name="tf_read_attempts", version="1", system_prompt="Read.", tools=[slow_read],
        plan=[StepSpec("read")],
        model=lambda: ScriptedModel({"read": [
            lambda sc: call("slow_read", marker=sc.input["marker"]), say("read")]})))


_register()
