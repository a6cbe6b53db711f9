"""Every labelled scenario, produced through the engine, gets the recommendation of its label."""
from __future__ import annotations

import pytest

from tests.triage import (  # noqa: F401 - register them
    scenarios_blocked,
    scenarios_cells,
    scenarios_meaning,
    scenarios_other,
    scenarios_world,
)
from pathlib import Path

from tests.triage.scenarios import SCENARIOS, table
from tests.triage.world import world

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _clean_world(engine):
    """A clean fault-injecting world for each scenario (engine settings: in-process ticks)."""
    world.reset()
    yield
    world.reset()


def test_there_are_at_least_fifty_scenarios():
    assert len(SCENARIOS) >= 50


def test_the_docs_table_is_the_labels():
    """docs/triage.md's situations → recommendation table is rendered from these labels, so it
    says what the engine is tested to answer; print ``table()`` to refresh it."""
    docs = Path(__file__).resolve().parents[2].joinpath("docs", "triage.md").read_text()
    assert table() in docs, f"docs/triage.md drifted from the scenario labels; paste:\n{table()}"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario(name):
    build, label = SCENARIOS[name]
    run = build()
    run.refresh_from_db()
    got = (run.status, run.recommended_action, tuple(run.recommended_alternatives))
    assert got == (label.status, label.action, label.alternatives), run.recommendation_why
    for words in label.why:
        assert words in run.recommendation_why, run.recommendation_why
