"""Version pinning: a run whose agent version is gone migrates if it can, else blocks."""
import pytest

from agentops.agents import registry
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.models import Event
from runs.services import run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db


@pytest.fixture
def pinned(engine):
    """A run started on v1 of its agent, after which only v2 is deployed."""
    script = {"s": [engine.call("lookup", item="x"), engine.say("ok")]}
    engine.make_agent("pinned", script, plan=["s"])
    run = run_start(agent="pinned", goal="g")
    registry._agents.pop(("pinned", "1"))
    v2 = engine.make_agent("pinned", script, plan=["s"])
    v2.version = "2"
    registry._agents.pop(("pinned", "1"), None)
    registry.register(v2)
    yield run
    registry._migrators.pop(("pinned", "1"), None)


def test_missing_version_without_migrator_blocks_naming_both(pinned):
    assert drive(pinned) == "blocked"
    assert pinned.attention_reason == "version_mismatch"
    assert "pinned@1" in pinned.attention_detail and "deployed: 2" in pinned.attention_detail


def test_registered_migrator_moves_the_run_to_the_deployed_version(pinned):
    registry.register_migrator("pinned", "1", "2",
                               lambda state: [{"type": "run.note",
                                               "data": {"text": "migrated 1->2"}}])
    assert drive(pinned) == "succeeded"
    assert pinned.agent_version == "2"
    migrated = Event.objects.get(run=pinned, type="run.migrated")
    assert migrated.data == {"from": "1", "to": "2"}
    assert "migrated 1->2" in load_state(pinned.pk)["notes"]
    assert replay_state(pinned.pk) == load_state(pinned.pk)
