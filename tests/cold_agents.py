"""An agent module that takes a while to import, like a real one pulling in its SDKs.

The cold-start test starts a server with AGENTOPS_AGENTS=tests.cold_agents and sends it many
first requests at once: every one of them must wait for this import, none may find the
registry empty.
"""
from __future__ import annotations

import time

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, say

time.sleep(0.8)

registry.register(Agent(name="cold-agent", version="1", system_prompt="cold start",
                        tools=[], plan=[StepSpec("s")],
                        model=lambda: ScriptedModel({"s": [say("ok")]})))
