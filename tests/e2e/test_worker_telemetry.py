"""A real worker process reports what it did: /metrics (multiprocess) and run-stamped JSON logs."""
from __future__ import annotations

import json
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from runs.statuses import TERMINAL

pytestmark = [pytest.mark.postgres, pytest.mark.slow,
              pytest.mark.django_db(transaction=True),
              pytest.mark.urls("tests.health_urls")]


def _samples(body: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_and_logs_of_a_real_worker_after_a_real_run(chaos_world, tmp_path, client,
                                                            monkeypatch):
    from runs.services import run_start
    from tests.e2e.workers import Worker

    metrics_dir = tmp_path / "prom"
    metrics_dir.mkdir()
    worker = Worker("telemetry", tmp_path, PROMETHEUS_MULTIPROC_DIR=str(metrics_dir),
                    AGENTOPS_LOG_JSON="1", LOG_LEVEL="INFO")
    worker.start()
    try:
        run = run_start(agent="chaos_mixed", goal="look, pay, ship, notify",
                        input={"order": "o-telemetry"})
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            run.refresh_from_db()
            if run.status in TERMINAL:
                break
            time.sleep(0.3)
        assert run.status == "succeeded", (run.status, run.attention_detail)
    finally:
        worker.stop()

    # /metrics of this (web) process aggregates the worker's counters from the shared dir.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(metrics_dir))
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    samples = _samples(response.content.decode())

    def value(name: str, **labels: str) -> float:
        return samples.get((name, tuple(sorted(labels.items()))), 0.0)

    assert value("agentops_units_total", agent="chaos_mixed") >= 8
    assert value("agentops_model_calls_total", agent="chaos_mixed", outcome="ok") == 8
    assert value("agentops_tool_calls_total", tool="charge", outcome="ok") == 1
    assert value("agentops_tool_calls_total", tool="inspect", outcome="ok") == 1
    assert value("agentops_step_duration_seconds_count", agent="chaos_mixed",
                 outcome="succeeded") == 4
    assert value("agentops_model_tokens_total", agent="chaos_mixed") == 8 * 60

    lines = [json.loads(line) for line in worker.log_path.read_text().splitlines()
             if line.startswith("{")]
    mine = [rec for rec in lines if rec.get("run_id") == str(run.pk)]
    messages = [rec["message"] for rec in mine]
    assert any(m.startswith("claimed by") for m in messages), messages
    assert "tick ended: succeeded" in messages
    steps = {rec["step"] for rec in mine if rec["message"].startswith("step ")}
    assert steps == {"look", "pay", "ship", "notify"}
    tool_lines = [rec for rec in mine if rec["message"].startswith("tool ")]
    assert {rec["message"].split()[1] for rec in tool_lines} == {"inspect", "charge", "ship",
                                                                 "email"}
    assert all(rec["tool_call_id"].startswith("tc") and rec["step"] for rec in tool_lines)
