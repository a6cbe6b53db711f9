"""A failure out of a tick that is not a lost process blocks the run at once, truthfully.

Real worker processes (``manage.py agentops worker``, AGENTOPS_AGENTS=tests.tick_failure_agents)
tick runs whose model client has a bug, whose probe returns garbage, whose worker has no model
configured, or whose provider streams bytes that are not UTF-8 (a real loopback server). Each
run stops with a reason that says what happened — never ``recovery_limit`` / "lost its
worker", which only a lost process may earn — and the worker log carries the exception type
beside the run id.
"""
from __future__ import annotations

import re

import pytest

from runs.models import Event, Run
from runs.services import run_start
from tests.e2e.workers import Worker, wait_until
from tests.llm.fakes import Answer, an_stream, fake_provider, oa_stream

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

AGENTS = "tests.tick_failure_agents"


@pytest.fixture(autouse=True)
def _agents(settings):
    """The agents registered in this process too (run_start looks them up)."""
    import tests.tick_failure_agents  # noqa: F401

    settings.AGENTOPS_ENQUEUE_TICKS = True


def _stopped(run_id, within_s: float = 60.0) -> Run:
    return wait_until(lambda: Run.objects.filter(pk=run_id).exclude(
        status__in=["queued", "running", "waiting"]).first(), within_s, f"run {run_id} to stop")


def _worker(tmp_path, **env: str) -> Worker:
    worker = Worker("tf", tmp_path, AGENTOPS_AGENTS=AGENTS, LOG_LEVEL="WARNING",
                    AGENTOPS_STEP_RETRY_LIMIT="1", **env)
    worker.start()
    return worker


def _assert_first_occurrence(run: Run, reason: str, *words: str) -> None:
    assert run.status == "blocked", (run.status, run.attention_detail)
    assert run.attention_reason == reason, run.attention_detail
    assert run.recoveries == 0  # stopped by its own tick, never recovered as a lost worker
    assert "lost its worker" not in run.attention_detail
    for word in words:
        assert word in run.attention_detail, run.attention_detail


def _log_names(worker: Worker, run: Run, exc_type: str, *, traceback: bool = True) -> None:
    """The worker's log record: the exception type, its traceback (not for a configuration
    error: its message says it all), then the run's ids."""
    log = worker.log_path.read_text(errors="replace")
    middle = ".*?Traceback.*?" if traceback else "[^\n]*"
    assert re.search(rf"tick failed \(\w+, {exc_type}\){middle}\[run_id={run.pk}",
                     log, re.S), log[-3000:]


def test_config_error_blocks_the_run_at_once(tmp_path):
    worker = _worker(tmp_path, AGENTOPS_MODEL_BASE_URL="", AGENTOPS_MODEL_NAME="")
    try:
        run = _stopped(run_start(agent="tf_settings_model", goal="Say hello").pk)
    finally:
        worker.stop()
    _assert_first_occurrence(run, "config_error", "AGENTOPS_MODEL_BASE_URL",
                             "AGENTOPS_MODEL_NAME", "fix the configuration")
    assert run.recommended_action == "retry"
    assert "fix the configuration" in run.recommendation_why
    failed = Event.objects.get(run=run, type="step.failed").data
    assert failed == {"step": "answer", "status": "blocked", "error_class": "config_error"}
    _log_names(worker, run, "ConfigError", traceback=False)
    assert worker.log_path.read_text(errors="replace").count("tick failed") == 1


def test_model_client_bug_blocks_with_the_exception(tmp_path):
    worker = _worker(tmp_path)
    try:
        run = _stopped(run_start(agent="tf_client_bug", goal="Say hello").pk)
    finally:
        worker.stop()
    _assert_first_occurrence(run, "internal_error", "KeyError: 'choices'", "during the model call",
                             "tests/tick_failure_agents.py", "not a lost worker")
    _log_names(worker, run, "KeyError")


def test_garbage_from_a_probe_blocks_with_the_exception(tmp_path):
    worker = _worker(tmp_path)
    try:
        run = _stopped(run_start(agent="tf_probe_garbage", goal="Ship o1").pk)
    finally:
        worker.stop()
    _assert_first_occurrence(run, "internal_error", "InvalidToolOutput",
                             "handling a tool's result", "returned str")
    assert run.current_tool_call  # the call whose result could not be handled
    _log_names(worker, run, "InvalidToolOutput")


GARBAGE = b'data: {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, ' \
          b'"delta": {"content": "\xff\xfe\xfa"}, "finish_reason": null}]}\n\n'


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_stream_garbage_is_retried_by_class_then_blocks(tmp_path, provider):
    whole, prefix = (oa_stream, "/v1") if provider == "openai" else (an_stream, "")
    tail = GARBAGE if provider == "openai" else b"event: content_block_delta\n" + GARBAGE
    with fake_provider(prefix) as fake:
        # Two good chunks, then bytes that are not UTF-8: every attempt (first and retry).
        fake.push(*[Answer(events=whole(["Hel", "lo"]).events[:2], tail=tail)
                    for _ in range(2)])
        worker = _worker(tmp_path, AGENTOPS_MODEL_PROVIDER=provider,
                         AGENTOPS_MODEL_BASE_URL=fake.base_url, AGENTOPS_MODEL_NAME="fake",
                         AGENTOPS_MODEL_API_KEY="sk-x", AGENTOPS_MODEL_STREAM="1")
        try:
            run = _stopped(run_start(agent="tf_settings_model", goal="Say hello").pk)
        finally:
            worker.stop()
        assert len(fake.requests) == 2  # the first attempt and one retry by its class
    _assert_first_occurrence(run, "retry_exhausted", "not UTF-8")
    failed = list(Event.objects.filter(run=run, type="model.failed").values_list("data", flat=True))
    assert [f["category"] for f in failed] == ["server_error", "server_error"]
    assert "tick failed" not in worker.log_path.read_text(errors="replace")
