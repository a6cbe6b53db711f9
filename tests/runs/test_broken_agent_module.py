"""A process that loads the agents lazily keeps the modules that import; a run of an agent
that is missing because its module broke is blocked at once, naming the module and error.
"""
from __future__ import annotations

import sys

import pytest

from agentops.agents import registry
from runs.services import run_start
from tests.conftest import drive
from tests.factories import make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def broken_deploy(engine, settings):
    """AGENTOPS_AGENTS with a good module and one that does not import, loaded afresh."""
    loaded, broken = registry._loaded, dict(registry._broken)
    sys.modules.pop("tests.broken_agents", None)
    settings.AGENTOPS_AGENTS = ["tests.author_agents", "tests.broken_agents"]
    registry._loaded = False
    yield
    registry._loaded, registry._broken = loaded, broken


def test_broken_module_blocks_only_its_agents_runs_config_error(broken_deploy):
    orphaned = make_run(agent="author_broken")  # queued before the module broke
    good = run_start(agent="author_good", goal="find bolts")
    assert drive(orphaned) == "blocked"
    assert orphaned.attention_reason == "internal_error"
    assert "agent module tests.broken_agents failed to import: ModuleNotFoundError: No module " \
           "named 'agentops_missing_supplier_sdk'" in orphaned.attention_detail
    assert drive(good) == "succeeded"
