"""An agent registered twice with a different definition is refused, naming both places."""
from __future__ import annotations

import importlib
import sys

import pytest

import tests.author_agents  # noqa: F401  (the first registration of author_good@1)
from agentops.agents import Agent, StepSpec, registry
from tests.author_agents import lookup


def test_agent_registered_twice_by_another_module_is_refused_registered_twice():
    sys.modules.pop("tests.author_twin_agents", None)
    with pytest.raises(ValueError) as refused:
        importlib.import_module("tests.author_twin_agents")
    assert str(refused.value).startswith(
        "agent author_good@1 is registered twice with different definitions: first in "
        "tests.author_agents, then in tests.author_twin_agents")
    assert registry.get("author_good", "1").system_prompt == "Look it up."  # the first stays


def test_the_same_definition_again_is_not_registered_twice():
    first = registry.get("author_good", "1")
    again = Agent(name="author_good", version="1", system_prompt=first.system_prompt,
                  tools=[lookup], plan=[StepSpec("look")], model=first.model)
    assert registry.register(again) is again  # a re-import of the same code
