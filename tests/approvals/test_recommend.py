"""Recommendations read from real blocked runs, and attention runs grouped by signature.

The full table (every failure class x effect x progress x role) is in tests/triage/.
"""
from __future__ import annotations

import pytest

from approvals.recommend import recommend_run
from approvals.recommend.groups import recommend_groups
from runs.engine.snapshots import load_state
from tests.approvals.conftest import blocked_run


@pytest.mark.django_db
def test_reversible_writes_make_rollback_the_first_alternative_to_terminate(engine):
    run = blocked_run("risk")  # step prep reserved stock (reversible, compensable)
    state = load_state(run.pk)
    rec = recommend_run(run=run, state=state, category="drift")
    assert rec.alternatives[0] == "rollback"
    assert "terminate" in (rec.action, *rec.alternatives)


@pytest.mark.django_db
def test_progress_comes_from_the_real_state(engine):
    run = blocked_run("prog")  # 1 of 2 steps done
    rec = recommend_run(run=run, state=load_state(run.pk), category="budget")
    assert rec.action == "raise_budget" and "1 of 2 steps done" in rec.why


@pytest.mark.django_db
def test_attention_runs_are_grouped_by_signature(engine):
    first, second = blocked_run("grp"), blocked_run("grp")
    other = blocked_run("grp-other")
    groups = recommend_groups()
    assert [g["count"] for g in groups] == [2, 1]
    top = groups[0]
    assert top["attention_signature"] == first.attention_signature == second.attention_signature
    assert top["agent_name"] == "grp" and top["recommended_action"] == first.recommended_action
    assert groups[1]["attention_signature"] == other.attention_signature
