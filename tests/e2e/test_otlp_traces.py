"""A real worker exports a run's OpenTelemetry trace to a real OTLP/HTTP receiver.

The run has a model call, a tool call whose connection drops on its first attempt (retried),
and a read its worker is SIGKILLed in; a second worker recovers the run and finishes it. The
receiver (tests/otlp_receiver.py, protobuf decoded with opentelemetry-proto) gets two traces,
one per attempt: invoke_agent → step → chat → execute_tool, with the GenAI attributes, the
ledger's ids and attempts, and the second attempt linked to the first. The ids stand in the
run's events and on the workers' JSON log lines.
"""
from __future__ import annotations

import json

import pytest

from ledger.models import ToolCall
from runs.models import Event, Run
from runs.services import run_start
from tests.e2e.workers import Worker, wait_until
from tests.otlp_receiver import Receiver

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _agents(settings):
    import tests.trace_agents  # noqa: F401

    settings.AGENTOPS_ENQUEUE_TICKS = True


def _env(receiver: Receiver) -> dict[str, str]:
    return {"AGENTOPS_AGENTS": "tests.trace_agents", "AGENTOPS_TOOL_TIMEOUT_S": "60",
            "AGENTOPS_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100",
            "AGENTOPS_LOG_JSON": "1", "LOG_LEVEL": "INFO"}


def _run_through_a_crash(tmp_path, receiver: Receiver) -> tuple[Run, list[Worker]]:
    marker = tmp_path / "calls.txt"
    first, second = Worker("t1", tmp_path, **_env(receiver)), Worker("t2", tmp_path,
                                                                        **_env(receiver))
    first.start()
    try:
        run = run_start(agent="tr_traced", goal="trace me", input={"marker": str(marker)})
        wait_until(lambda: marker.exists() and "slow 1" in marker.read_text(), 60,
                   "the read's first attempt")
        # The spans a worker emitted before it hung reach the receiver on their own.
        wait_until(lambda: any(s["name"].startswith("chat") and s["attrs"]["agentops.turn"] == 2
                               for s in receiver.spans()), 20, "the second model call's span")
        first.kill()  # SIGKILL in the read: its attempt's root and step are never emitted
        second.start()
        wait_until(lambda: Run.objects.filter(pk=run.pk, status="succeeded").exists(), 90,
                   "the run to succeed on the second worker")
        wait_until(lambda: sum(s["name"].startswith("invoke_agent")
                               for s in receiver.spans()) == 2, 20, "both attempts' roots")
    finally:
        first.kill()
        second.stop()
    return run, [first, second]


def test_a_real_worker_exports_the_run_tree_links_and_attributes(tmp_path):
    with Receiver() as receiver:
        run, workers = _run_through_a_crash(tmp_path, receiver)
        spans = receiver.spans()
    by_id = {s["span_id"]: s for s in spans}
    roots = sorted((s for s in spans if not s["parent"]), key=lambda s: s["attrs"]["agentops.attempt"])
    assert [r["name"] for r in roots] == ["invoke_agent tr_traced"] * 2
    first, second = roots
    assert first["trace_id"] != second["trace_id"]
    assert first["error"] and first["attrs"]["agentops.outcome"] == "worker_lost"
    assert not second["error"] and second["attrs"]["agentops.outcome"] == "succeeded"
    assert second["links"] == [(first["trace_id"], first["span_id"],
                                {"agentops.link": "previous_attempt"})]
    assert first["end"] <= second["start"]  # the recovery gap lies between the two

    def kids(span, name=""):
        return [s for s in spans if s["parent"] == span["span_id"] and s["name"].startswith(name)]

    # attempt 1: step → chat (turn 1) → lookup attempt 1 (failed, retried); the retry ran in
    # a later tick of the same attempt and still hangs off the model call that asked for it.
    (step1,) = kids(first, "step work")
    assert step1["error"] and step1["trace_id"] == first["trace_id"]
    chats1 = sorted(kids(step1, "chat"), key=lambda s: s["attrs"]["agentops.turn"])
    assert [c["attrs"]["agentops.turn"] for c in chats1] == [1, 2]
    for c in chats1:
        assert c["attrs"]["gen_ai.operation.name"] == "chat"
        assert c["attrs"]["gen_ai.system"] == "scriptedmodel"
        assert c["attrs"]["gen_ai.usage.input_tokens"] == 50
        assert c["attrs"]["gen_ai.usage.output_tokens"] == 10
        assert c["attrs"]["gen_ai.response.finish_reasons"] == ["tool_calls"]
    lookups = sorted(kids(chats1[0], "execute_tool"), key=lambda s: s["attrs"]["agentops.tool.attempt"])
    lookup = ToolCall.objects.get(run=run, tool="flaky_lookup")
    assert [(s["attrs"]["agentops.tool.attempt"], s["attrs"]["agentops.tool.outcome"],
             s["attrs"]["agentops.tool.next"]) for s in lookups] == [
        (1, "failed", "retry"), (2, "succeeded", "continue")]
    for s in lookups:
        assert s["attrs"]["gen_ai.tool.name"] == "flaky_lookup"
        assert s["attrs"]["agentops.ledger.tool_call_id"] == lookup.tool_call_id
        assert s["attrs"]["agentops.tool.effect_class"] == "read"
    assert lookups[0]["error"] and lookups[0]["attrs"]["error.type"] == "transient"
    assert not kids(chats1[1])  # the read it asked for died with its worker

    # attempt 2: the same step again, linked to the first; the read ran again as attempt 2,
    # under the step (its model call is in the other trace, linked), then the last reply.
    (step2,) = kids(second, "step work")
    assert step2["links"] == [(first["trace_id"], step1["span_id"], {"agentops.link": "resumed"})]
    (read,) = kids(step2, "execute_tool")
    assert read["attrs"]["agentops.tool.attempt"] == 2 and read["attrs"]["gen_ai.tool.name"] == "slow_read"
    assert read["links"] == [(first["trace_id"], chats1[1]["span_id"], {"agentops.link": "asked_by"})]
    (last,) = kids(step2, "chat")
    assert last["attrs"]["gen_ai.response.finish_reasons"] == ["stop"]
    assert all(s["trace_id"] in (first["trace_id"], second["trace_id"]) for s in spans)
    assert all(s["parent"] in by_id for s in spans if s["parent"])  # nothing orphaned

    # The ids join: each model and tool call's event carries its span, and so do the logs.
    events = list(Event.objects.filter(run=run).order_by("seq").values("type", "data"))
    replied = [e["data"] for e in events if e["type"] == "model.replied"]
    assert [(d["trace_id"], d["span_id"]) for d in replied] == [
        (c["trace_id"], c["span_id"]) for c in [*chats1, last]]
    results = [e["data"] for e in events if e["type"] in ("tool.result", "tool.attempt_failed")
               and e["data"].get("category") != "worker_lost"]  # no span: nobody ran it out
    assert {d["span_id"] for d in results} == {lookups[0]["span_id"], lookups[1]["span_id"],
                                               read["span_id"]}
    (recovered,) = [e["data"] for e in events if e["type"] == "run.recovered"]
    assert (recovered["previous_trace_id"], recovered["trace_id"]) == (
        first["trace_id"], second["trace_id"])
    lines = [json.loads(ln) for w in workers for n in range(1, w.starts + 1)
             for ln in (tmp_path / f"{w.name}-{n}.log").read_text().splitlines()
             if ln.startswith("{")]
    tool_lines = [ln for ln in lines if ln.get("tool_call_id") == lookup.tool_call_id]
    assert {ln["span_id"] for ln in tool_lines} >= {lookups[0]["span_id"]}
    assert all(ln["trace_id"] == first["trace_id"] for ln in tool_lines)
