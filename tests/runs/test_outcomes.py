"""A run ends "completed with exceptions" when its work was not all done as planned; cancel
reaches its children, approvals, calls and attempts; a rolled-back write can be redone."""
from __future__ import annotations

import datetime as dt
import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, WaitForChildren, tool
from approvals.actions import ACTIONS
from approvals.models import Approval, Intervention
from ledger.errors import ToolPermissionDenied
from ledger.models import ToolAttempt, ToolCall
from runs.engine.runtime import session as session_mod
from runs.engine.runtime.recovery import runs_recover_expired
from runs.engine.runtime.snapshots import load_state, replay_state
from agentops.control import RunControl
from runs.models import Event, Run
from runs.services import run_cancel, run_start
from tests.approvals.conftest import agent, blocked_run, unknown_run
from tests.conftest import drive
from tests.console_factories import client_for
from tests.engine_agents import world

pytestmark = pytest.mark.django_db


def _skipped_run(users) -> Run:
    run = blocked_run("skp")
    ACTIONS["skip"].execute(users["operator"], run, "region eu is out of scope")
    assert drive(run) == "completed_with_exceptions"
    return run


def test_a_skipped_step_ends_completed_with_exceptions_in_queue_panel_and_metrics(engine,
                                                                                   users):
    run = _skipped_run(users)
    [exc] = run.exceptions
    assert (exc["kind"], exc["who"], exc["why"]) == ("step_skipped", "operator",
                                                     "region eu is out of scope")
    assert exc["what"] == "step check was skipped; its work was not done" and exc["when"]
    web = client_for(users["viewer"])
    queue = web.get(reverse("console:queue") + "?tab=exceptions").content.decode()
    assert 'data-tab="exceptions"' in queue and str(run.pk)[:8] in queue
    assert "Completed with exceptions <span class=\"count\">1</span>" in queue
    assert "1 exception" in queue
    assert str(run.pk)[:8] not in web.get(reverse("console:queue") + "?tab=blocked").content.decode()
    panel = web.get(reverse("console:run", args=[run.pk])).content.decode()
    assert "completed with exceptions" in panel
    assert 'data-exception="step_skipped"' in panel and "region eu is out of scope" in panel
    metrics = web.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    assert ('agentops_runs{reason="",status="completed_with_exceptions",team="default"} 1.0'
            in metrics)


def test_follow_exits_non_zero_and_prints_the_exceptions(engine, users):
    run = blocked_run("cli")
    ACTIONS["skip"].execute(users["operator"], run, "region eu is out of scope")
    out = io.StringIO()
    with pytest.raises(CommandError, match="completed with 1 exception"):
        call_command("agentops", "follow", str(run.pk), "--inline", "--timeout", "60",
                     stdout=out)
    text = out.getvalue()
    assert "completed_with_exceptions" in text
    assert "step check was skipped; its work was not done (by operator" in text
    assert "region eu is out of scope" in text


def test_a_rejection_reaches_the_model_and_the_demo_agent_does_not_claim_a_refund(
        engine, users):
    from agentops.demo import agents  # noqa: F401 - registers the demo agents
    from agentops.demo.models import WorldEffect

    run = run_start(agent="support-returns", goal="return A-2002",
                    input={"order_id": "A-2002"})
    assert drive(run, max_ticks=200) == "waiting" and run.wait_kind == "approval"
    approval = Approval.objects.get(run=run, status="pending")
    ACTIONS["reject"].execute(users["support"], approval, "amount over policy")
    assert drive(run, max_ticks=200) == "completed_with_exceptions"
    refund = ToolCall.objects.get(run=run, tool="issue_refund")
    assert refund.status == "rejected"
    told = Event.objects.get(run=run, type="tool.result", tool_call_id=refund.tool_call_id)
    assert told.data["error"]["message"] == "rejected by support: amount over policy"
    assert Event.objects.filter(run=run, type="model.replied", data__step="refund",
                                data__text__startswith="refund not made").exists()
    assert not WorldEffect.objects.filter(kind="refund").exists()
    email = ToolCall.objects.get(run=run, tool="send_customer_email")
    assert "We refunded" not in email.args["body"] and "could not refund" in email.args["body"]
    assert [e["kind"] for e in Run.objects.get(pk=run.pk).exceptions] == ["approval_rejected"]


def test_rejection_of_a_step_that_must_succeed_blocks_instead(engine, users):
    registry.register(Agent(
        name="strict", version="1", system_prompt="t", tools=registry_tools(),
        plan=[StepSpec("s", requires_tools=("pay",))],
        model=lambda: ScriptedModel({"s": [call("pay", to="bob", amount=5), say("paid")]})))
    run = run_start(agent="strict", goal="g")
    assert drive(run) == "waiting"
    ACTIONS["reject"].execute(users["support"], Approval.objects.get(run=run), "not bob")
    assert drive(run) == "blocked" and run.attention_reason == "incomplete_step"
    assert run.attention_detail == ("step s ended without a successful pay "
                                    "(rejected: rejected by support: not bob)")


def registry_tools():
    from tests.approvals.conftest import ALL_TOOLS

    return ALL_TOOLS


def test_after_a_rollback_the_cancelled_write_is_redone_as_a_new_generation(engine, users):
    world.fail_next["reserve"] = [ToolPermissionDenied("stock service says no")]
    agent("redo", {"a": [call("lookup", item="x"), say("looked")],
                   "b": [call("reserve", item="book"), call("reserve", item="book"),
                         say("reserved")]}, ["a", "b"])
    run = run_start(agent="redo", goal="g")
    assert drive(run) == "blocked"
    first = ToolCall.objects.get(run=run, tool="reserve")
    assert first.status == "failed"
    start_b = Event.objects.filter(run=run, type="step.started", data__step="b").first().seq
    ACTIONS["rollback"].execute(users["operator"], run, "try again", to_seq=start_b - 1,
                                confirm="rollback", then="resume")
    first.refresh_from_db()
    assert first.status == "cancelled"
    assert drive(run) == "completed_with_exceptions"
    redo = ToolCall.objects.get(run=run, tool="reserve", generation=2)
    assert redo.status == "succeeded" and redo.supersedes == first.tool_call_id
    assert redo.idempotency_key != first.idempotency_key
    assert world.count("reserve") == 1
    html = client_for(users["viewer"]).get(reverse("console:run", args=[run.pk])).content.decode()
    assert "generation 2" in html and f"#tc-{first.tool_call_id}" in html
    assert [e["kind"] for e in Run.objects.get(pk=run.pk).exceptions] == ["rolled_back"]


def test_operator_finishes_with_partial_results_on_purpose(engine, users):
    run = blocked_run("fin")
    preview = ACTIONS["finish_partial"].preview(run)
    assert [(p["tool"], p["will"]) for p in preview] == [("lookup", "cancelled, never runs")]
    ACTIONS["finish_partial"].execute(users["operator"], run, "good enough for the audit", confirm="finish")
    run.refresh_from_db()
    assert run.status == "completed_with_exceptions" and run.finished_at is not None
    [exc] = run.exceptions
    assert exc["kind"] == "finished_partial" and exc["who"] == "operator"
    assert exc["why"] == "good enough for the audit" and exc["steps"] == ["check"]
    assert Intervention.objects.get(run=run).action == "run.finish_partial"
    assert replay_state(run.pk) == load_state(run.pk)


def test_a_run_with_an_unconfirmed_call_cannot_end_clean(engine, users):
    run = unknown_run("unk2")
    email = ToolCall.objects.get(run=run)
    ACTIONS["finish_partial"].execute(users["operator"], run, "stop here", confirm="finish")
    run.refresh_from_db()
    kinds = [e["kind"] for e in run.exceptions]
    assert kinds == ["finished_partial", "unknown_call"]
    assert run.exceptions[1]["tool_call_id"] == email.tool_call_id


@tool(effect="read")
def fan_out(ctx, n: int) -> ToolResult:
    """Start n child runs and wait for them."""
    raise WaitForChildren([{"agent": "kid", "goal": f"kid {i}"} for i in range(n)],
                          timeout_s=3600)


def test_cancelling_a_parent_cancels_its_children_and_expires_its_approvals(engine, users):
    registry.register(Agent(name="kid", version="1", system_prompt="t", tools=registry_tools(),
                            plan=[StepSpec("s")],
                            model=lambda: ScriptedModel({"s": [call("pay", to="x", amount=1)]})))
    registry.register(Agent(name="parent", version="1", system_prompt="t", tools=[fan_out],
                            plan=[StepSpec("s")],
                            model=lambda: ScriptedModel({"s": [call("fan_out", n=2)]})))
    parent = run_start(agent="parent", goal="g")
    assert drive(parent) == "waiting" and parent.wait_kind == "children"
    kids = list(Run.objects.filter(parent=parent))
    for kid in kids:
        assert drive(kid) == "waiting" and kid.wait_kind == "approval"
    ACTIONS["terminate"].execute(users["operator"], parent, "customer withdrew", confirm="terminate")
    for kid in kids:
        kid.refresh_from_db()
        assert kid.status == "cancelled"
        why = Event.objects.get(run=kid, type="run.cancelled").data
        assert why["parent"] == str(parent.pk) and "customer withdrew" in why["reason"]
        assert not Approval.objects.filter(run=kid, status="pending").exists()
        assert ToolCall.objects.get(run=kid).status == "cancelled"
    audit = Intervention.objects.get(run=parent)
    assert sorted(audit.data["cancelled_children"]) == sorted(str(k.pk) for k in kids)


class Crash(RunControl):
    """The worker process dies here."""


@pytest.fixture
def dies_mid_call(monkeypatch):
    """Kill the worker right after it marked an unsafe write running (before it ran)."""
    real = session_mod.RunSession.commit

    def commit(self, events, **kwargs):
        real(self, events, **kwargs)
        if any(e.type == "tool.started" for e in events):
            raise Crash("worker died mid-call")

    monkeypatch.setattr(session_mod.RunSession, "commit", commit)
    return lambda: monkeypatch.setattr(session_mod.RunSession, "commit", real)


def _lost_worker_run(name: str) -> Run:
    agent(name, {"s": [call("email", to="a@b.c"), say("sent")]}, ["s"])
    run = run_start(agent=name, goal="g")
    with pytest.raises(Crash):
        drive(run)
    return Run.objects.get(pk=run.pk)


def test_attempts_are_closed_with_the_calls_outcome(engine, users, dies_mid_call):
    run = _lost_worker_run("lost")
    dies_mid_call()  # the next worker lives
    call_row = ToolCall.objects.get(run=run)
    assert call_row.status == "running"
    assert ToolAttempt.objects.get(tool_call=call_row).status == "running"
    Run.objects.filter(pk=run.pk).update(
        lease_expires_at=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
    assert runs_recover_expired() == [run.pk]
    assert drive(run) == "unknown"
    assert ToolAttempt.objects.get(tool_call=call_row).status == "unknown"
    ACTIONS["confirm_not_executed"].execute(users["operator"], run, "not in the outbox",
                                            confirm="again")
    assert ToolAttempt.objects.get(tool_call=call_row, attempt=1).status == \
        "confirmed_not_executed"
    assert drive(run) == "completed_with_exceptions"
    attempts = list(ToolAttempt.objects.filter(tool_call=call_row)
                    .order_by("attempt").values_list("attempt", "status"))
    assert attempts == [(1, "confirmed_not_executed"), (2, "succeeded")]


def test_cancelling_a_run_with_a_call_in_flight_closes_its_attempt(engine, dies_mid_call):
    run = _lost_worker_run("inflight")
    run_cancel(run=run, actor="op", reason="stop")
    call_row = ToolCall.objects.get(run=run)
    assert call_row.status == "unknown" and call_row.error_class == "cancelled_in_flight"
    assert ToolAttempt.objects.get(tool_call=call_row).status == "unknown"


def test_skip_and_rollback_dialogs_show_next_write_steps_and_carried_exceptions(engine, users):
    world.fail_next["lookup"] = [ToolPermissionDenied("no access")]
    registry.register(Agent(
        name="dlg", version="1", system_prompt="t", tools=registry_tools(),
        plan=[StepSpec("prep"), StepSpec("check", depends_on=("prep",)),
              StepSpec("bill", depends_on=("check",), requires_tools=("charge",))],
        model=lambda: ScriptedModel({"prep": [call("reserve", item="book"), say("ok")],
                                     "check": [call("lookup", item="eu")]})))
    run = run_start(agent="dlg", goal="g")
    assert drive(run) == "blocked"
    web = client_for(users["operator"])
    skip = web.get(reverse("console:run_action", args=[run.pk, "skip"])).content.decode()
    assert 'data-next-step="bill"' in skip and "writes: charge" in skip
    assert 'data-next-step="check"' not in skip
    assert 'data-exception="step_skipped"' in skip and "step check was skipped" in skip
    start = Event.objects.filter(run=run, type="step.started", data__step="prep").first().seq
    back = web.get(reverse("console:run_action", args=[run.pk, "rollback"])
                   + f"?to_seq={start - 1}").content.decode()
    assert 'data-next-step="prep"' in back and 'data-next-step="bill"' in back
    assert 'data-exception="compensated"' in back and 'data-exception="rolled_back"' in back
