"""Every execution of a tool call gets the next attempt number, reads as well as writes.

A real worker process runs a read that writes down ``ctx.attempt`` and hangs; the worker is
SIGKILLed mid-call; a second worker recovers the run. The read runs again as attempt 2 of the
same call (never attempt 1 again, never a new call), each attempt has its own started and
closing events and its own ToolAttempt row, and (call, attempt) pairs are unique.
"""
from __future__ import annotations

from collections import Counter

import pytest

from ledger.models import ToolAttempt, ToolCall
from runs.models import Event, Run
from runs.services import run_start
from tests.e2e.workers import Worker, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _agents(settings):
    """The agents registered in this process too (run_start looks them up)."""
    import tests.tick_failure_agents  # noqa: F401

    settings.AGENTOPS_ENQUEUE_TICKS = True


def test_attempt_number_of_a_read_rerun_after_its_worker_died(tmp_path):
    marker = tmp_path / "attempts.txt"
    env = {"AGENTOPS_AGENTS": "tests.tick_failure_agents", "AGENTOPS_TOOL_TIMEOUT_S": "60"}
    first, second = Worker("a1", tmp_path, **env), Worker("a2", tmp_path, **env)
    first.start()
    try:
        run = run_start(agent="tf_read_attempts", goal="read", input={"marker": str(marker)})
        wait_until(lambda: marker.exists() and marker.read_text(), 60, "the read's first attempt")
        first.kill()  # SIGKILL mid-call: nothing is cleaned up
        second.start()
        done = wait_until(lambda: Run.objects.filter(pk=run.pk, status="succeeded").first(),
                          90, "the run to succeed on the second worker")
    finally:
        first.kill()
        second.stop()

    lines = [ln.split() for ln in marker.read_text().splitlines()]
    call = ToolCall.objects.get(run=run)
    assert lines == [[call.tool_call_id, "1"], [call.tool_call_id, "2"]]
    assert done.recoveries == 1
    attempts = list(ToolAttempt.objects.filter(tool_call=call).order_by("attempt")
                    .values_list("attempt", "status", "error_class"))
    assert attempts == [(1, "timed_out", "worker_lost"), (2, "succeeded", "")]
    assert call.attempts == 2 and call.status == "succeeded"
    events = list(Event.objects.filter(run=run, tool_call_id=call.tool_call_id)
                  .order_by("seq").values_list("type", "attempt"))
    assert events == [("tool.started", 1), ("tool.attempt_failed", 1),
                      ("tool.started", 2), ("tool.result", 2)]
    pairs = Counter(ToolAttempt.objects.filter(tool_call__run=run)
                    .values_list("tool_call_id", "attempt"))
    assert max(pairs.values()) == 1
