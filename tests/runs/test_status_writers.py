"""One writer per status with its table: ToolCall, Approval and Step moves are checked."""
from __future__ import annotations

import pytest

from approvals.errors import IllegalApprovalTransition
from approvals.statuses import ApprovalStatus
from approvals.transition import approval_transition, approvals_close_pending
from ledger.errors import IllegalToolCallTransition
from ledger.models import ToolCall
from ledger.services.limits import Cap, limits_admit
from ledger.services.record import toolcall_update
from runs.engine.runtime.events import NewEvent
from runs.engine.runtime.steps import step_rows_writers, step_statuses
from runs.errors import IllegalTransition
from tests.console_factories import make_approval, make_attention_run, make_tool_call


def test_a_settled_call_cannot_be_reopened_as_running(db):
    run = make_attention_run()
    call = make_tool_call(run, status="rejected")
    with pytest.raises(IllegalToolCallTransition) as exc:
        toolcall_update(call, "running")
    assert exc.value.http_status == 409
    assert ToolCall.objects.get(pk=call.pk).status == "rejected"


def test_the_concurrency_limiter_checks_the_table_before_its_bulk_update(db):
    run = make_attention_run()
    done = make_tool_call(run, status="succeeded", tool="charge_card")
    with pytest.raises(IllegalToolCallTransition, match="from succeeded to running"):
        limits_admit(calls=[done], caps={"charge_card": Cap(5, 0)}, team_id=run.team_id)
    assert ToolCall.objects.get(pk=done.pk).status == "succeeded"


def test_a_decided_approval_cannot_be_decided_again(db):
    approval = make_approval(make_attention_run())
    approval_transition(approval, ApprovalStatus.APPROVED, reason="ok")
    with pytest.raises(IllegalApprovalTransition) as exc:
        approval_transition(approval, ApprovalStatus.REJECTED, reason="changed my mind")
    assert exc.value.http_status == 409
    approval.refresh_from_db()
    assert approval.status == ApprovalStatus.APPROVED and approval.reason == "ok"


def test_closing_pending_approvals_only_moves_pending_ones(db):
    run = make_attention_run()
    decided, pending = make_approval(run), make_approval(run, tool="refund")
    approval_transition(decided, ApprovalStatus.REJECTED, reason="no")
    assert approvals_close_pending(run=run, to=ApprovalStatus.STALE, reason="gone") == [pending.pk]
    with pytest.raises(IllegalApprovalTransition):
        approvals_close_pending(run=run, to=ApprovalStatus.PENDING, reason="reopen")


def test_step_moves_are_checked_against_the_step_table():
    state = {"steps": {"a": {"status": "cancelled"}, "b": {"status": "blocked"}}}
    with pytest.raises(IllegalTransition, match="cannot move from cancelled to running"):
        step_rows_writers("run", [NewEvent("step.started", {"step": "a"})], state,
                          step_statuses(state, [NewEvent("step.started", {"step": "a"})]))
    events = [NewEvent("step.reset", {"step": "b"}), NewEvent("step.started", {"step": "b"}),
              NewEvent("step.retrying", {"step": "b", "retries": 1}),
              NewEvent("step.completed", {"step": "b"})]
    (update,) = step_rows_writers("run", events, state, step_statuses(state, events))
    assert update.values["status"] == "succeeded"
