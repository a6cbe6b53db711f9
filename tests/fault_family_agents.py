"""Agents for the combined fault test: the chaos agents plus one whose model is the provider.

Worker processes import this module (AGENTOPS_AGENTS=tests.fault_family_agents). ``ff_stream``
has no model of its own: it uses the model from settings, which the test points at a real
loopback server (tests/llm/fakes.py) that streams its replies and cuts some of them. Its one
step asks for ``charge`` (an idempotent write into the chaos world), then says it is done.
"""
from __future__ import annotations

from agentops.agents import Agent, StepSpec, registry
from tests import chaos_agents


def _register() -> None:
    registry.register(Agent(name="ff_stream", version="1",
                            system_prompt="Charge the order named in the goal, then say done.",
                            tools=[chaos_agents.charge], plan=[StepSpec("answer")]))


_register()
