"""Each failure class drives the right automatic action and recommendation."""
import pytest

from agentops.llm import protocol as p
from agentops.llm.scripted import call, say
from tests.scripted_items import fail_then
from ledger import errors as le
from runs.engine.core.policy import POLICY, backoff_delay
from runs.models import Event
from runs.services import run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db

# (model error or tool error, where, outcome after the fault persists, reason, recommendation)
PERSISTENT = [
    (p.RateLimited("429"), "model", "blocked", "retry_exhausted", "retry"),
    (p.ModelTimeout("slow"), "model", "blocked", "retry_exhausted", "retry"),
    (p.ServerError("503"), "model", "blocked", "retry_exhausted", "retry"),
    (p.AuthError("401"), "model", "blocked", "permanent_error", "retry"),
    (p.InvalidRequest("400"), "model", "blocked", "permanent_error", "terminate"),
    (le.ToolTransient("503"), "tool", "blocked", "retry_exhausted", "retry"),
    (le.ToolRateLimited("429"), "tool", "blocked", "retry_exhausted", "retry"),
    (le.ToolPermanent("order closed"), "tool", "blocked", "permanent_error", "skip"),
    (le.ToolPermissionDenied("no access"), "tool", "blocked", "permanent_error", "retry"),
    (le.ToolCredentialsRefused("401"), "tool", "blocked", "permanent_error", "retry"),
    (le.ToolNotFound("no item x"), "tool", "blocked", "permanent_error", "restart"),
    (le.ToolApiChanged("no price"), "tool", "blocked", "permanent_error", "retry"),
    (le.ToolRequestInvalid("422"), "tool", "blocked", "permanent_error", "terminate"),
]


def _agent(engine, name, fault=None, where="model", times=99):
    if where == "model":
        script = {"s": [fail_then(fault, call("lookup", item="x"), times=times), say("ok")]}
    else:
        engine.world.fail_next["lookup"] = [fault] * times
        script = {"s": [call("lookup", item="x"), call("lookup", item="x"), say("ok")]}
    engine.make_agent(name, script, plan=["s"])
    return run_start(agent=name, goal="g")


@pytest.mark.parametrize("fault,where,status,reason,action", PERSISTENT,
                         ids=[type(f).__name__ for f, *_ in PERSISTENT])
def test_persistent_failure_ends_in_reason_and_recommendation(engine, fault, where, status,
                                                              reason, action):
    run = _agent(engine, f"fail-{type(fault).__name__}", fault, where)
    assert drive(run) == status
    assert (run.attention_reason, run.recommended_action) == (reason, action)
    assert run.recommendation_why


@pytest.mark.parametrize("fault", [p.RateLimited("429", retry_after=0), p.ServerError("502"),
                                   p.ModelTimeout("t")])
def test_transient_model_failure_is_retried_then_succeeds(engine, fault):
    run = _agent(engine, f"once-{type(fault).__name__}", fault, "model", times=1)
    assert drive(run) == "succeeded"
    assert Event.objects.filter(run=run, type="step.retrying").count() == 1


def test_retry_after_becomes_a_durable_timer(engine, settings):
    run = _agent(engine, "ra", p.RateLimited("429", retry_after=30), "model", times=1)
    assert drive(run) == "waiting"
    assert run.wait_kind == "timer"
    delay = (run.wait_until - run.updated_at).total_seconds()
    assert 29 <= delay <= 31


def test_invalid_output_is_repaired_then_blocks_when_it_persists(engine):
    bad = p.ModelReply(tool_calls=(p.ToolCallRequest(name="lookup", arguments=None,
                                                     raw_arguments='{"item": '),),
                       finish_reason="length")
    run = _agent(engine, "cut", bad, "model", times=1)
    assert drive(run) == "succeeded"
    run = _agent(engine, "cut-forever", bad, "model", times=99)
    assert drive(run) == "blocked"
    assert run.attention_reason == "invalid_output"


def test_ambiguous_unsafe_write_recommends_confirm(engine):
    engine.world.timeout_after_effect.add("email")
    engine.make_agent("amb", {"s": [call("email", to="x@y.z"), say("ok")]}, plan=["s"])
    run = run_start(agent="amb", goal="g")
    assert drive(run) == "unknown"
    # The timeout came after the request was sent: "It executed" is the likelier answer.
    assert run.recommended_action == "confirm_executed"
    assert run.recommended_alternatives[0] == "confirm_not_executed"
    assert "It executed is likelier" in run.recommendation_why


def test_every_policy_row_has_a_triage_row():
    from approvals.recommend import TABLE, failure_class

    for category in POLICY:
        assert failure_class(category) in TABLE, category


def test_backoff_grows_is_capped_and_honours_retry_after():
    delays = [backoff_delay(n, base=1, cap=8, retry_after=None, jitter=0.999) for n in range(1, 7)]
    assert delays == sorted(delays) and max(delays) <= 8
    assert backoff_delay(1, base=1, cap=8, retry_after=20, jitter=0.5) == 20
