"""The benchmark seeder writes what it reports: dense logs, realistic shapes, approvals."""
from __future__ import annotations

import pytest
from django.db.models import Count, Max, Min

from approvals.models import Approval
from bench.seed import seed
from runs.engine.core import reducer
from runs.engine.runtime.events import event_tail
from runs.models import Event, Run
from runs.statuses import ATTENTION

SCALE = 0.0004  # 40 runs, 800 events + the long run
BIG = 300


@pytest.fixture
def seeded(db):
    """A tiny seed on the test database, and its summary."""
    return seed(scale=SCALE, big_run_events=BIG)


def test_seed_writes_the_runs_and_events_it_reports(seeded):
    assert seeded["skipped"] is False
    assert Run.objects.count() == seeded["runs"] == 40
    assert Event.objects.count() == seeded["events"] == 800 + BIG
    assert sum(seeded["statuses"].values()) == seeded["runs"]
    assert Event.objects.filter(run_id=seeded["big_run_id"]).count() == BIG


def test_every_run_has_a_dense_log_matching_last_seq(seeded):
    per_run = Event.objects.values("run_id").annotate(n=Count("id"), lo=Min("seq"), hi=Max("seq"))
    last_seq = dict(Run.objects.values_list("id", "last_seq"))
    assert len(per_run) == len(last_seq)
    for row in per_run:
        assert row["lo"] == 1
        assert row["hi"] == row["n"] == last_seq[row["run_id"]]


def test_each_log_reduces_to_the_run_projection(seeded):
    for run in Run.objects.all():
        state = reducer.fold(reducer.empty_state(), event_tail(run.pk, 0))
        assert state["status"] == run.status
        assert state["usage"]["model_calls"] == run.model_calls
        assert state["usage"]["tool_calls"] == run.tool_calls
        assert state["usage"]["tokens"] == run.tokens_used


def test_attention_runs_carry_what_the_console_shows(seeded):
    attention = Run.objects.filter(status__in=list(ATTENTION))
    assert attention.exists()
    for run in attention.exclude(status="waiting"):
        assert run.attention_signature and run.recommended_action and run.attention_detail
    for run in attention.filter(status="waiting"):
        assert run.wait_kind and run.wait_until


def test_pending_approvals_wait_on_their_tool_calls(seeded):
    approvals = Approval.objects.filter(status="pending").select_related("run", "tool_call")
    assert approvals.count() == seeded["approvals"] >= 2
    for approval in approvals:
        assert approval.tool_call.status == "awaiting_approval"
        assert approval.tool_call.run_id == approval.run_id
        assert (approval.run.status, approval.run.wait_kind) == ("waiting", "approval")


def test_a_second_seed_of_the_same_size_is_skipped(seeded):
    again = seed(scale=SCALE, big_run_events=BIG)
    assert again["skipped"] is True
    assert again["big_run_id"] == seeded["big_run_id"]
    assert Run.objects.count() == seeded["runs"]
