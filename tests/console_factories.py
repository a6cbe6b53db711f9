"""Builders for console tests: users in each role, runs in each queue state, ledger rows."""
from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from django.contrib.auth.models import Group, User

from agentops import clock
from approvals.models import Approval, Intervention
from approvals.roles import ADMIN, OPERATOR, SUPPORT, VIEWER
from ledger.keys import redact
from ledger.models import ToolCall
from runs.models import Event, Run, Step
from runs.statuses import RunStatus
from tests.factories import make_run

PASSWORD = "pw-for-tests-1"
RUNS_T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
EVENTS_T0 = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
ROLE_USERS = {"viewer": VIEWER, "operator": OPERATOR, "support": SUPPORT, "admin": ADMIN}


def make_user(username: str, *roles: str) -> User:
    """Create a user in the given role groups (created if the migration has not run)."""
    user = User.objects.create_user(username=username, password=PASSWORD)
    for role in roles:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


def make_role_users() -> dict[str, User]:
    """Create one user per role, keyed viewer/operator/support/admin, plus 'nobody'."""
    users = {name: make_user(name, role) for name, role in ROLE_USERS.items()}
    users["nobody"] = make_user("nobody")
    return users


def make_tool_call(run: Run, *, tool: str = "send_email", status: str = "unknown",
                   summary: str = "", args: dict[str, Any] | None = None, **fields: Any,
                   ) -> ToolCall:
    """Create a ledger row of ``run``."""
    tcid = fields.pop("tool_call_id", f"tc_{uuid.uuid4().hex[:12]}")
    return ToolCall.objects.create(
        tool_call_id=tcid, run=run, step_key=fields.pop("step_key", run.current_step or "main"),
        turn=fields.pop("turn", 1), tool=tool, args=args or {"to": "a@example.com"},
        args_hash="h" * 64, idempotency_key=uuid.uuid4().hex, status=status, summary=summary,
        attempts=fields.pop("attempts", 1), **fields)


def make_attention_run(status: str = RunStatus.BLOCKED, *, goal: str = "Refund order 42",
                       agent: str = "support-bot", reason: str = "retry_exhausted",
                       tool: str = "charge_card", summary: str = "",
                       age: dt.timedelta = dt.timedelta(minutes=10), **fields: Any) -> Run:
    """Create a run that needs attention, with a current tool call and two steps."""
    run = make_run(goal=goal, agent=agent)
    tc = make_tool_call(run, tool=tool, status="failed" if status != "unknown" else "unknown",
                        summary=summary, step_key="charge", effect="write")
    values = dict(status=status, current_step="charge", current_tool_call=tc.tool_call_id,
                  steps_total=3, steps_done=1, tokens_used=1200, budget_tokens=10_000,
                  model_calls=4, tool_calls=2, cost_micros=15_000, budget_cost_micros=1_000_000,
                  started_at=clock.now() - age, attention_signature=f"sig-{tool}")
    if status == RunStatus.WAITING:
        values.update(wait_kind=fields.pop("wait_kind", "approval"),
                      recommended_action=fields.pop("recommended", ""))
    else:
        values.update(attention_reason=reason if status == RunStatus.BLOCKED else "",
                      attention_detail=fields.pop("detail", "charge_card failed 3 times: 503"),
                      recommended_action=fields.pop("recommended", "retry"),
                      recommendation_why="transient provider error; little work done")
    values.update(fields)
    Run.objects.filter(pk=run.pk).update(**values, updated_at=clock.now() - age)
    now = clock.now()
    Step.objects.create(run=run, key="plan", position=0, status="succeeded",
                        started_at=now - age, finished_at=now - age + dt.timedelta(seconds=20))
    Step.objects.create(run=run, key="charge", position=1, status="blocked", retry_count=3,
                        started_at=now - age + dt.timedelta(seconds=20))
    Step.objects.create(run=run, key="notify", position=2)
    run.refresh_from_db()
    return run


def make_approval(run: Run, *, tool: str = "send_email", args: dict[str, Any] | None = None,
                  expires_in: dt.timedelta | None = dt.timedelta(minutes=30), **fields: Any,
                  ) -> Approval:
    """Create a pending approval for a new awaiting_approval tool call of ``run``."""
    args = args or {"to": "ceo@example.com", "subject": "Refund"}
    tc = make_tool_call(run, tool=tool, status="awaiting_approval", args=args)
    return Approval.objects.create(
        run=run, tool_call=tc, tool=tool, proposed_args=args, state_seq=run.last_seq,
        expires_at=clock.now() + expires_in if expires_in else None, **fields)


def make_intervention(*, actor: User, action: str = "run.retry", run: Run | None = None,
                      reason: str = "because", **data: Any) -> Intervention:
    """Create an audit row."""
    return Intervention.objects.create(actor=actor, actor_name=actor.get_username(),
                                       action=action, run=run, reason=reason, data=data)


def client_for(user):
    """Return a Django test client logged in as ``user``."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


def make_runs_bulk(n: int, *, status: str = "failed", agent: str = "support-bot",
                   start: int = 0, created_by: User | None = None,
                   step: dt.timedelta = dt.timedelta(minutes=1)) -> list[Run]:
    """Insert ``n`` runs in one statement, run i changed at RUNS_T0 + (start + i) * step."""
    runs = [Run(agent_name=agent, agent_version="1", goal=f"{status} run {start + i}",
                status=status, created_by=created_by,
                wait_kind="approval" if status == "waiting" else "")
            for i in range(n)]
    Run.objects.bulk_create(runs)
    for i, run in enumerate(runs):
        run.updated_at = RUNS_T0 + (start + i) * step
    Run.objects.bulk_update(runs, ["updated_at"])
    return runs


def make_event_history(run: Run, n: int) -> None:
    """Append ``n`` events after run.created: tool.started/tool.result pairs of tool calls
    tc_0, tc_1, … to refund and send_email in turn, one with HTML in it, one with a
    sensitive argument stored as its redaction marker (as the engine stores it)."""
    rows = []
    for i in range(n):
        seq = i + 2
        kind = "tool.result" if i % 2 else "tool.started"
        data = {"tool": "refund" if i % 4 < 2 else "send_email", "n": i,
                "note": "customer <b>vip</b>" if i == 7 else ""}
        if i == 9:
            data["args"] = redact({"pin": "4729-PIN", "order": "A-7"}, ("pin",))
        rows.append(Event(run=run, seq=seq, type=kind, data=data, tool_call_id=f"tc_{i // 2}",
                          actor="engine", at=EVENTS_T0 + dt.timedelta(seconds=seq)))
    Event.objects.bulk_create(rows)
    Run.objects.filter(pk=run.pk).update(last_seq=n + 1)
