"""An agent module that does not import: its dependency is not installed."""
from __future__ import annotations

import agentops_missing_supplier_sdk  # noqa: F401

from agentops.agents import Agent, registry

registry.register(Agent(name="author_broken", version="1", system_prompt="s", tools=[]))
