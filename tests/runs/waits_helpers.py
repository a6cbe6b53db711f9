"""Helpers for the wait/sweeper tests: move the engine clock, make approval agents."""
from __future__ import annotations

import datetime as dt
from contextlib import contextmanager

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel
from agentops.tools import ToolResult, tool
from tests.clock_helpers import clock_reads


@contextmanager
def later(seconds: float):
    """Run the block with the engine clock ``seconds`` ahead of real time."""
    with clock_reads(lambda: dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=seconds)):
        yield


def approval_agent(name: str, on_expiry: str, script: dict) -> Agent:
    """Register an agent whose ``refund`` tool needs approval and expires per ``on_expiry``."""

    # "manual": a person can undo it, so its author may let an expiry cancel the run (an
    # undeclared write without a compensation is irreversible: an expiry always denies it).
    @tool(effect="write", idempotent=True, reversibility="manual", approval="always",
          approval_expiry_s=60, approval_on_expiry=on_expiry)
    def refund(ctx, order: str) -> ToolResult:
        """Refund an order."""
        return ToolResult(facts={"refunded": order}, summary=f"refunded {order}")

    return registry.register(Agent(name=name, version="1", system_prompt="test", tools=[refund],
                                   plan=[StepSpec(k) for k in script],
                                   model=lambda: ScriptedModel(script)))
