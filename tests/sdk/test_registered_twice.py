"""An agent registered twice with a different definition is refused, naming both places.

Through the registry's own loading of AGENTOPS_AGENTS (as every process loads them); a real
worker refusing to start on it is in tests/e2e/test_author_workers.py.
"""
from __future__ import annotations

import sys

import pytest

from agentops.agents import registry


@pytest.fixture
def reload_registry(settings):
    """Have the registry load the author's modules afresh; put it back afterwards."""
    loaded, broken = registry._loaded, dict(registry._broken)
    for name in ("tests.author_agents", "tests.author_twin_agents"):
        sys.modules.pop(name, None)
    registry._agents.pop(("author_good", "1"), None)
    registry._loaded = False
    yield settings
    registry._loaded, registry._broken = loaded, broken


def test_agent_registered_twice_by_another_module_is_refused_registered_twice(reload_registry):
    reload_registry.AGENTOPS_AGENTS = ["tests.author_agents", "tests.author_twin_agents"]
    broken = registry.broken_modules()
    assert broken == {"tests.author_twin_agents": (
        "ValueError: agent author_good@1 is registered twice with different definitions: "
        "first in tests.author_agents, then in tests.author_twin_agents; give the new "
        "definition another version (or another name)")}
    assert registry.get("author_good", "1").system_prompt == "Look it up."  # the first stays


def test_the_same_module_loaded_again_is_not_registered_twice(reload_registry):
    reload_registry.AGENTOPS_AGENTS = ["tests.author_agents"]
    assert registry.broken_modules() == {}
    sys.modules.pop("tests.author_agents")
    registry._loaded = False  # a second import of the same code: same definitions
    assert registry.broken_modules() == {}
