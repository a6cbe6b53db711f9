"""The Prometheus exposition: engine counters/histograms and database gauges."""
from __future__ import annotations

import datetime as dt

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentops import clock
from agentops.observability import metrics
from approvals.models import Approval
from ledger.models import ToolCall
from runs.models import Run, WorkerHeartbeat
from runs.statuses import BlockReason, RunStatus

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.health_urls")]


def _scrape(client) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def _value(samples, name, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def _run(status: str, **fields) -> Run:
    return Run.objects.create(agent_name="billing", agent_version="1", goal="g", status=status,
                              **fields)


def test_every_metric_family_is_exposed_after_the_engine_reports(client):
    metrics.observe_step("billing", "succeeded", 1.5)
    metrics.observe_tool_call("charge_card", "ok", 0.2)
    metrics.count_retry("tool")
    metrics.count_recovery()
    metrics.count_lease_lost()
    metrics.count_budget_exhausted("billing")
    metrics.observe_model_usage("billing", tokens=120, cost_micros=3_000)
    _run(RunStatus.QUEUED)
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    for family in [
        "agentops_runs", "agentops_queue_depth", "agentops_queue_oldest_age_seconds",
        "agentops_approvals_pending", "agentops_approvals_oldest_age_seconds",
        "agentops_workers_alive", "agentops_metrics_database_up",
        "agentops_step_duration_seconds_bucket", "agentops_tool_call_duration_seconds_bucket",
        "agentops_tool_calls_total", "agentops_retries_total", "agentops_recoveries_total",
        "agentops_lease_lost_total", "agentops_budget_exhausted_total",
        "agentops_model_tokens_total", "agentops_model_cost_micros_total",
    ]:
        assert f"\n{family}" in text, family


def test_helpers_add_to_their_counters(client):
    before = _scrape(client)
    metrics.observe_tool_call("send_email", "timeout", 30.0)
    metrics.observe_tool_call("send_email", "timeout", 31.0)
    metrics.count_retry("model")
    metrics.observe_model_usage("support", tokens=500, cost_micros=1_250)
    after = _scrape(client)

    def delta(name, **labels):
        return _value(after, name, **labels) - _value(before, name, **labels)

    assert delta("agentops_tool_calls_total", tool="send_email", outcome="timeout") == 2
    assert delta("agentops_tool_call_duration_seconds_count", tool="send_email") == 2
    assert delta("agentops_tool_call_duration_seconds_bucket", tool="send_email", le="30.0") == 1
    assert delta("agentops_retries_total", kind="model") == 1
    assert delta("agentops_model_tokens_total", agent="support") == 500
    assert delta("agentops_model_cost_micros_total", agent="support") == 1_250


def test_runs_are_counted_by_status_and_reason(client):
    _run(RunStatus.QUEUED)
    _run(RunStatus.QUEUED)
    _run(RunStatus.BLOCKED, attention_reason=BlockReason.BUDGET_EXHAUSTED)
    _run(RunStatus.BLOCKED, attention_reason=BlockReason.STALLED)
    _run(RunStatus.SUCCEEDED)
    samples = _scrape(client)
    team = {"team": "default"}
    assert _value(samples, "agentops_runs", status="queued", reason="", **team) == 2
    assert _value(samples, "agentops_runs", status="blocked", reason="budget_exhausted",
                  **team) == 1
    assert _value(samples, "agentops_runs", status="blocked", reason="stalled", **team) == 1
    assert _value(samples, "agentops_runs", status="succeeded", reason="", **team) == 1
    assert ("agentops_runs", (("reason", ""), ("status", "cancelled"), ("team", "default"))
            ) in samples
    assert _value(samples, "agentops_queue_depth") == 2


def test_queue_and_approval_ages_come_from_the_oldest_row(client):
    old = _run(RunStatus.QUEUED)
    Run.objects.filter(pk=old.pk).update(updated_at=clock.now() - dt.timedelta(seconds=600))
    _run(RunStatus.QUEUED)
    waiting = _run(RunStatus.WAITING, wait_kind="approval")
    call = ToolCall.objects.create(
        tool_call_id="tc_1", run=waiting, step_key="main", turn=1, tool="refund",
        args_hash="x", idempotency_key="k1",
    )
    approval = Approval.objects.create(run=waiting, tool_call=call, tool="refund", state_seq=1,
                                       requested_by=None)
    Approval.objects.filter(pk=approval.pk).update(
        created_at=clock.now() - dt.timedelta(seconds=120)
    )
    WorkerHeartbeat.objects.create(name="w", seen_at=clock.now())
    samples = _scrape(client)
    assert 600 <= _value(samples, "agentops_queue_oldest_age_seconds") < 660
    assert _value(samples, "agentops_approvals_pending") == 1
    assert 120 <= _value(samples, "agentops_approvals_oldest_age_seconds") < 180
    assert _value(samples, "agentops_workers_alive") == 1


def test_empty_queue_reports_zero_age(client):
    samples = _scrape(client)
    assert _value(samples, "agentops_queue_depth") == 0
    assert ("agentops_queue_oldest_age_seconds", ()) in samples
    assert _value(samples, "agentops_queue_oldest_age_seconds") == 0


def test_database_gauges_can_be_left_out_for_worker_hosts(client, settings):
    settings.AGENTOPS_METRICS_DB_GAUGES = False
    metrics.count_recovery()
    samples = _scrape(client)
    assert not any(name == "agentops_runs" for name, _ in samples)
    assert any(name == "agentops_recoveries_total" for name, _ in samples)


def test_multiprocess_mode_adds_up_counters_of_every_process(tmp_path):
    """With PROMETHEUS_MULTIPROC_DIR, one exposition sums the counters of other processes."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    bump = ("from agentops.observability import metrics as m; m.count_recovery(); "
            "m.observe_tool_call('fetch', 'ok', 0.1)")
    for _ in range(2):  # two separate worker processes
        subprocess.run([sys.executable, "-c", bump], env=env, check=True, timeout=60)
    show = ("import sys; from agentops.observability import metrics as m; "
            "sys.stdout.write(m.metrics_exposition().decode())")
    out = subprocess.run([sys.executable, "-c", show], env=env, check=True, timeout=60,
                         capture_output=True, text=True).stdout
    assert "agentops_recoveries_total 2.0" in out
    assert 'agentops_tool_calls_total{outcome="ok",tool="fetch"} 2.0' in out


def test_runs_are_counted_per_team(client):
    from runs.models import Team

    ops = Team.objects.create(slug="ops", name="Ops")
    _run(RunStatus.BLOCKED, attention_reason=BlockReason.STALLED, team=ops)
    _run(RunStatus.BLOCKED, attention_reason=BlockReason.STALLED)
    samples = _scrape(client)
    for team in ("ops", "default"):
        assert _value(samples, "agentops_runs", status="blocked", reason="stalled",
                      team=team) == 1
