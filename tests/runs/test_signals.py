"""Durable signal and child-run waits: deduplicated, kept when early, never doubled."""
import pytest

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel
from agentops.tools import WaitForChildren, WaitForSignal, tool
from ledger.models import ToolCall
from runs.engine.runtime.snapshots import load_state, replay_state
from runs.models import Event, Run, Signal
from runs.services import run_cancel, run_signal, run_start
from runs.sweeper import sweep_once
from tests.conftest import drive
from tests.runs.waits_helpers import later

pytestmark = pytest.mark.django_db


@tool(effect="read")
def await_approval_mail(ctx, ticket: str):
    """Wait until the customer answers the ticket."""
    raise WaitForSignal("customer_reply", timeout_s=3600)


@tool(effect="read")
def fan_out(ctx, n: int):
    """Split the job into child runs and wait for them."""
    raise WaitForChildren([{"agent": "sig_child", "goal": f"part {i}", "input": {"i": i}}
                           for i in range(n)])


def _agent(name, script, tools):
    registry.register(Agent(name=name, version="1", system_prompt="t", tools=tools,
                            plan=[StepSpec(k) for k in script],
                            model=lambda: ScriptedModel(script)))


@pytest.fixture
def waiter(engine):
    """An agent whose step waits for the ``customer_reply`` signal."""
    _agent("sig_wait", {"s": [engine.call("await_approval_mail", ticket="t1"), engine.say("ok")]},
           [await_approval_mail])
    return run_start(agent="sig_wait", goal="answer the ticket")


def _count(run, type_):
    return Event.objects.filter(run=run, type=type_).count()


def test_same_signal_five_times_wakes_the_run_once(waiter):
    assert drive(waiter) == "waiting"
    assert waiter.wait_kind == "signal" and waiter.wait_data["name"] == "customer_reply"
    for _ in range(5):
        run_signal(run=waiter, name="customer_reply", payload={"text": "yes"}, key="mail-77")
    assert Signal.objects.filter(run=waiter).count() == 1
    assert _count(waiter, "signal.received") == 1 and _count(waiter, "wait.ended") == 1
    assert drive(waiter) == "succeeded"
    result = load_state(waiter.pk)["turns"][0]["calls"][0]["result"]
    assert result["facts"] == {"signal": "customer_reply", "payload": {"text": "yes"}}
    assert replay_state(waiter.pk) == load_state(waiter.pk)


def test_signal_sent_before_the_wait_is_kept_and_consumed(waiter):
    run_signal(run=waiter, name="customer_reply", payload={"text": "early"}, key="mail-1")
    run_signal(run=waiter, name="customer_reply", payload={"text": "early"}, key="mail-1")
    assert drive(waiter) == "succeeded"
    assert _count(waiter, "wait.started") == 0
    assert Signal.objects.get(key="mail-1").consumed_seq is not None
    result = load_state(waiter.pk)["turns"][0]["calls"][0]["result"]
    assert result["facts"]["payload"] == {"text": "early"}


def test_a_second_signal_waits_for_the_next_wait(waiter):
    run_signal(run=waiter, name="customer_reply", payload={"n": 1}, key="a")
    run_signal(run=waiter, name="customer_reply", payload={"n": 2}, key="b")
    assert drive(waiter) == "succeeded"
    assert list(Signal.objects.filter(run=waiter, consumed_seq__isnull=True)
                .values_list("key", flat=True)) == ["b"]


def test_signal_wait_times_out_into_a_failed_result(waiter):
    assert drive(waiter) == "waiting"
    with later(3601):
        assert sweep_once().timeouts == [waiter.pk]
    assert ToolCall.objects.get(run=waiter).status == "failed"
    assert drive(waiter) == "succeeded"
    error = load_state(waiter.pk)["turns"][0]["calls"][0]["result"]["error"]
    assert error["category"] == "wait_timeout"


def test_children_run_independently_and_a_failed_child_does_not_redo_siblings(engine):
    _agent("sig_child", {"work": [engine.call("charge", amount=1), engine.say("done")]},
           engine.TOOLS)
    _agent("sig_parent", {"split": [engine.call("fan_out", n=2), engine.say("merged")]},
           [fan_out])
    parent = run_start(agent="sig_parent", goal="big job")
    assert drive(parent) == "waiting" and parent.wait_kind == "children"
    first, second = Run.objects.filter(parent=parent).order_by("idempotency_key")
    assert drive(first) == "succeeded"
    assert sweep_once().children == []  # one child still going
    run_cancel(run=second, actor="op", reason="bad input")
    assert sweep_once().children == [parent.pk]
    # The cancelled child's work was not done: the parent is not a clean success (issue 40).
    assert drive(parent) == "completed_with_exceptions"
    parent.refresh_from_db()
    assert [(e["kind"], e["child"]) for e in parent.exceptions] == [("child_exceptions",
                                                                      str(second.pk))]
    facts = load_state(parent.pk)["facts"]
    (result,) = facts.values()
    assert [c["status"] for c in result["children"]] == ["succeeded", "cancelled"]
    assert Run.objects.filter(parent=parent).count() == 2
    assert engine.world.count("charge") == 1  # the finished sibling was not run again
