"""An agent for the failover drill: its side effects land in a file, outside the database.

Worker processes import this module (AGENTOPS_AGENTS=tests.failover_agents) with
AGENTOPS_TEST_WORLD naming the file. ``ship`` is not idempotent but probeable, like a
warehouse that can be asked whether it shipped: every execution appends one line, so an
effect made twice (a run re-doing work its lost commit had recorded) shows as two lines with
the same key. The world does not fail over with the database: the drill counts in it.
"""
from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from agentops import clock
from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from ledger.errors import ToolTransient

ORDERS = ("a", "b", "c")


def world_path() -> Path:
    """Return the world file this process writes (AGENTOPS_TEST_WORLD)."""
    return Path(os.environ["AGENTOPS_TEST_WORLD"])


def world_lines() -> list[tuple[str, str]]:
    """Return every effect made as (key, what)."""
    path = world_path()
    text = path.read_text() if path.exists() else ""
    return [tuple(line.split(" ", 1)) for line in text.splitlines() if line]


def _probe_ship(ctx, order: str) -> ToolResult | None:
    if any(key == ctx.idempotency_key for key, _ in world_lines()):
        return ToolResult(facts={"shipped": order}, summary="shipped (probed)")
    return None


@tool(effect="write", probe=_probe_ship, reversibility="manual")
def ship(ctx, order: str) -> ToolResult:
    """Ship an order (not idempotent; the warehouse can be asked whether it shipped)."""
    time.sleep(0.15)
    with open(world_path(), "a") as world:
        fcntl.flock(world, fcntl.LOCK_EX)
        # A warehouse honouring the request deadline: a late write is refused, never applied.
        if ctx.deadline is not None and clock.now() >= ctx.deadline:
            raise ToolTransient("ship: the request's deadline passed; nothing done")
        world.write(f"{ctx.idempotency_key} {ctx.run_id}:{order}\n")
        world.flush()
        os.fsync(world.fileno())
    time.sleep(0.15)
    return ToolResult(facts={"shipped": order}, summary=f"shipped {order}")


registry.register(Agent(
    name="failover_ship", version="1", system_prompt="failover drill agent", tools=[ship],
    plan=[StepSpec(order) for order in ORDERS],
    model=lambda: ScriptedModel({order: [call("ship", order=order), say(f"shipped {order}")]
                                 for order in ORDERS})))
