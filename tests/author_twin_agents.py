"""A second module registering author_good@1 with another definition (a copy-paste slip)."""
from __future__ import annotations

from agentops.agents import Agent, StepSpec, registry
from tests.author_agents import lookup

registry.register(Agent(name="author_good", version="1", system_prompt="Look it up twice.",
                        tools=[lookup], plan=[StepSpec("look")]))
