"""Bulk actions: count first, a required reason, one result per run (done / refused and why)."""
from __future__ import annotations

import pytest

from agentops.errors import InvalidInput
from approvals.bulk import bulk_apply, bulk_count
from approvals.errors import NotAllowed
from approvals.models import Intervention
from runs.models import Run
from tests.approvals.conftest import blocked_run, unknown_run
from tests.conftest import drive

pytestmark = pytest.mark.django_db


def test_bulk_retry_of_a_signature_group_reports_each_run(engine, users):
    a, b = blocked_run("bulk"), blocked_run("bulk")
    odd = unknown_run("bulk-odd")
    group = Run.objects.filter(attention_signature=a.attention_signature)
    assert bulk_count(queryset=group, teams=None) == 2
    results = bulk_apply(teams=None, verb="skip", actor=users["operator"], reason="region out of scope",
                         run_ids=[a.pk, b.pk, odd.pk])
    outcome = {r["run_id"]: (r["outcome"], r["detail"]) for r in results}
    assert outcome[a.pk] == outcome[b.pk] == ("done", "lookup (read): cancelled, never runs")
    assert outcome[odd.pk][0] == "refused" and "this one is unknown" in outcome[odd.pk][1]
    assert drive(a) == drive(b) == "completed_with_exceptions"  # a skipped step is no clean success
    odd.refresh_from_db()
    assert odd.status == "unknown"
    bulk_ids = set(Intervention.objects.values_list("data__bulk", flat=True))
    assert len(bulk_ids) == 1 and Intervention.objects.count() == 2


def test_bulk_needs_a_reason_a_role_and_one_selection(engine, users):
    run = blocked_run("bulk2")
    with pytest.raises(InvalidInput, match="reason"):
        bulk_apply(teams=None, verb="retry", actor=users["operator"], reason=" ", run_ids=[run.pk])
    with pytest.raises(NotAllowed, match="operators"):
        bulk_apply(teams=None, verb="retry", actor=users["support"], reason="r", run_ids=[run.pk])
    with pytest.raises(InvalidInput, match="exactly one"):
        bulk_apply(teams=None, verb="retry", actor=users["operator"], reason="r")
    run.refresh_from_db()
    assert run.status == "blocked" and not Intervention.objects.exists()
