"""A finished run replayed through the replay model and its recorded results rebuilds its state."""
import json

import pytest

from agentops.agents import Agent, StepSpec, registry
from tests.replay_model import ReplayModel, recorded_results
from agentops.tools import tool
from agentops.jsonstate import canonical_json
from runs.engine.runtime.snapshots import load_state
from runs.services import run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db


def _normalised(state):
    """Replace generated tool_call ids by their position so two runs compare."""
    ids = {}
    for t in state["turns"]:
        for c in t["calls"]:
            ids[c["id"]] = f"call{len(ids)}"
    text = canonical_json(state)
    for real, pos in ids.items():
        text = text.replace(real, pos)
    return canonical_json(json.loads(text))


def test_replay_rebuilds_the_same_final_state(engine):
    engine.make_agent("orig", engine.MIXED_SCRIPT, plan=["quote", "pay", "ship", "notify"])
    source = run_start(agent="orig", goal="sell a book")
    assert drive(source) == "succeeded"
    results = iter(recorded_results(source.pk))

    def replayed(spec):
        return tool(lambda ctx, **kw: next(results), name=spec.name, parameters=spec.parameters,
                    effect="read")

    original = registry.get("orig")
    registry.register(Agent(name="replay", version="1", system_prompt=original.system_prompt,
                            tools=[replayed(t) for t in original.tools],
                            plan=[StepSpec(s.key) for s in original.plan],
                            model=lambda: ReplayModel(source.pk)))
    copy = run_start(agent="replay", goal="sell a book")
    assert drive(copy) == "succeeded"
    a, b = load_state(source.pk), load_state(copy.pk)
    a["run"]["agent"] = b["run"]["agent"] = "x"
    # Every call opens its attempt before dispatch (tool.started), the source's writes and
    # the copy's replayed reads alike: the same log position and the same state.
    assert a.pop("seq") == b.pop("seq")
    assert _normalised(a) == _normalised(b)
    assert len(engine.world.effects) == 3  # only the source run touched the world
