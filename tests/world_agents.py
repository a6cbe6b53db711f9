"""An agent for the worker-process tests of the re-check after a recovery (tests/e2e).

``catalog_read`` declares a version probe that reads the file named by
``AGENTOPS_TEST_CATALOG_FILE`` (the test rewrites it while the run has no worker), writes its
attempt number to the run's marker file and hangs on its first attempt, so the test can
SIGKILL the worker mid-call.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool


def catalog_version() -> str:
    """Return the catalog version the test's file says."""
    return Path(os.environ["AGENTOPS_TEST_CATALOG_FILE"]).read_text().strip()


@tool(effect="read", version_probe=catalog_version)
def catalog_read(ctx, marker: str) -> ToolResult:
    """Read the catalog: note the attempt, hang on the first one."""
    with open(marker, "a") as out:
        out.write(f"{ctx.tool_call_id} {ctx.attempt}\n")
    if ctx.attempt == 1:
        time.sleep(3600)
    return ToolResult(facts={"attempt": ctx.attempt}, summary=f"attempt {ctx.attempt}")


registry.register(Agent(
    name="world_catalog", version="1", system_prompt="Read the catalog.", tools=[catalog_read],
    plan=[StepSpec("read")],
    model=lambda: ScriptedModel({"read": [
        lambda sc: call("catalog_read", marker=sc.input["marker"]), say("read")]})))
