"""An agent with no ``model=``: it needs the AGENTOPS_MODEL_* settings (doctor, --inline)."""
from __future__ import annotations

from agentops.agents import Agent, StepSpec, registry
from tests.author_agents import lookup

registry.register(Agent(name="author_nomodel", version="1", system_prompt="Look it up.",
                        tools=[lookup], plan=[StepSpec("look")]))
