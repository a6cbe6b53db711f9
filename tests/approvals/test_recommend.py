"""Recommendations read from real blocked runs, and attention runs grouped by signature.

The full table (every failure class x effect x progress x role) is in tests/triage/.
"""
from __future__ import annotations

import pytest

from approvals.recommend import recommend_run
from runs.engine.runtime.snapshots import load_state
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
def test_attention_runs_are_grouped_by_signature_on_the_queue(engine, users):
    from django.test import Client

    first, second = blocked_run("grp"), blocked_run("grp")
    blocked_run("grp-other")
    client = Client()
    client.force_login(users["operator"])
    page = client.get("/?view=groups").content.decode()
    rows = page[page.index('class="grid groups"'):].split("<tr data-row")[1:]
    assert len(rows) == 2 and "<strong>2</strong>" in rows[0] and "<strong>1</strong>" in rows[1]
    assert first.attention_signature == second.attention_signature
    assert f"sig={first.attention_signature}" in rows[0]
