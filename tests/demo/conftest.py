"""Fixtures for the demo agents: the engine driven in-process, the demo agents registered."""
from __future__ import annotations

import pytest


@pytest.fixture
def demo(engine):
    """Return the demo agents module, registered, with ticks driven in-process."""
    from agentops.demo import agents

    return agents
