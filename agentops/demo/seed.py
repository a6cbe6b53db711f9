"""Seed the demo: two teams, one user per role (demo-only passwords) and runs in every state.

The returns runs belong to the team ``support-desk``, the sales reports and the document
batch to ``payments``; the users named after a role hold it in every team, and one more user
per team holds a role in that team only, so a newcomer sees what a team member sees.

Seeded runs are driven in this process with run_tick, so the console shows them at once. The
live ones are left queued for the worker so a visitor sees runs move from the first seconds:
the document batch (its document store is slowed so each child run takes about
``AGENTOPS_DEMO_PACE_S``, well inside a tick's slice, so children end one at a time) and two
refunds whose carrier is rate-limited, after which their approval requests arrive: one after
``AGENTOPS_DEMO_APPROVAL_DELAY_S``, one ``LATE_APPROVAL_SCALE`` times later for whoever looks
in late. Seeding is idempotent: users are created once (their demo passwords
reset), and each run carries an idempotency key, so a second seed finds the runs it made and
leaves them as they are; a live run that is no longer live is started afresh (a new key), so
every launch has something to watch.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import Group, User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from agentops.demo.scripts import EXTRACT_PARTS
from approvals.actions.terminate import ACTION as terminate
from approvals.roles import ADMIN, OPERATOR, SUPPORT, VIEWER
from approvals.users import membership_set
from runs.engine.runtime.loop import run_tick
from runs.models import Run, Team
from runs.services import run_start
from runs.statuses import RUNNABLE

WORKER = "demo-seed"
LATE_APPROVAL_SCALE = 6  # the second live refund's approval: for whoever opens the demo late
# Demo-only credentials: printed on start, never for a real deployment.
DEMO_USERS = (("viewer", VIEWER, "demo-viewer-pw"), ("operator", OPERATOR, "demo-operator-pw"),
              ("support", SUPPORT, "demo-support-pw"), ("admin", ADMIN, "demo-admin-pw"))
DEMO_TEAMS = (("payments", "Payments"), ("support-desk", "Support desk"))
# (username, team, role in that team only, password)
DEMO_TEAM_USERS = (("pay-admin", "payments", ADMIN, "demo-pay-admin-pw"),
                   ("desk-operator", "support-desk", OPERATOR, "demo-desk-operator-pw"))
AGENT_TEAMS = {"support-returns": "support-desk", "sales-report": "payments",
               "document-batch": "payments"}


@dataclass(frozen=True)
class Scenario:
    """One seeded run: what it starts with and the state it is expected to end in."""

    name: str
    agent: str
    goal: str
    input: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, Any] | None = None
    expect: str = "succeeded"
    terminate: bool = False
    live: bool = False
    delay_scale: float = 1.0  # a live refund: its carrier wait in AGENTOPS_DEMO_APPROVAL_DELAY_S


SCENARIOS = (
    Scenario("refund-probed", "support-returns", "Return trail shoes (A-1001)",
             {"order_id": "A-1001", "faults": {"issue_refund": "timeout_after_refund"}}),
    Scenario("refund-approval", "support-returns", "Return a road bike helmet (A-2002)",
             {"order_id": "A-2002"}, expect="waiting:approval"),
    Scenario("carrier-rate-limited", "support-returns", "Return a rain jacket (A-3003)",
             {"order_id": "A-3003", "faults": {"track_logistics": "rate_limit:3600"}},
             expect="waiting:timer"),
    Scenario("email-unknown", "support-returns", "Return wool socks (A-5005)",
             {"order_id": "A-5005", "faults": {"send_customer_email": "timeout_after_send"}},
             expect="unknown"),
    Scenario("carrier-loop", "support-returns", "Return trail shoes again (A-1001)",
             {"order_id": "A-1001", "faults": {"model": "repeat_tracking"}},
             expect="blocked:loop_detected"),
    Scenario("refund-terminated", "support-returns", "Return a tent (A-6006)",
             {"order_id": "A-6006"}, expect="cancelled", terminate=True),
    Scenario("sales-ok", "sales-report", "Write the Q3 sales report", {"title": "Q3 sales"}),
    Scenario("sales-eu-denied", "sales-report", "Write the Q3 sales report (EU locked)",
             {"title": "Q3 sales", "faults": {"query_sales:eu": "permission"}},
             expect="blocked:permanent_error"),
    Scenario("sales-budget", "sales-report", "Write the Q4 sales report on a tight budget",
             {"title": "Q4 sales"}, budget={"model_calls": 3}, expect="blocked:budget_exhausted"),
    Scenario("document-batch", "document-batch", "Extract invoice fields from 240 documents",
             {"documents": 240, "batch_size": 20, "faults": {"model_outage": "2:6"}},
             expect="succeeded", live=True),
    Scenario("refund-approval-later", "support-returns", "Return a kayak paddle (A-7007)",
             {"order_id": "A-7007"}, expect="waiting:approval", live=True),
    Scenario("refund-approval-late", "support-returns", "Return a climbing harness (A-8008)",
             {"order_id": "A-8008"}, expect="waiting:approval", live=True,
             delay_scale=LATE_APPROVAL_SCALE),
)
LIVE_STATUSES = ("queued", "running")
LIVE_WAITS = ("timer", "children")
LIVE_HORIZON_S = 15 * 60


def demo_pace_s() -> float:
    """Seconds each document-extract child of the live batch spends reading (default 12)."""
    return float(os.environ.get("AGENTOPS_DEMO_PACE_S") or 12)


def demo_approval_delay_s() -> float:
    """Seconds the first live refund waits on the carrier before its approval (default 30)."""
    return float(os.environ.get("AGENTOPS_DEMO_APPROVAL_DELAY_S") or 30)


def approval_delay_s(name: str) -> float:
    """Seconds the live refund ``name`` waits on its carrier before its approval arrives."""
    scale = next((sc.delay_scale for sc in SCENARIOS if sc.name == name), 1.0)
    return demo_approval_delay_s() * scale


def live_input(sc: Scenario) -> dict[str, Any]:
    """The input of a live scenario with its pacing (which holds for this launch)."""
    faults = dict(sc.input.get("faults", {}))
    if sc.agent == "document-batch":  # per read: a child reads its documents in parts
        faults["read_documents"] = f"slow:{demo_pace_s() / EXTRACT_PARTS:g}"
    else:
        faults["track_logistics"] = f"rate_limit:{approval_delay_s(sc.name):g}"
    return {**sc.input, "faults": faults}


def is_live(run: Run) -> bool:
    """True while a run moves on its own within minutes: queued, running, waiting for its
    children, or on a timer due within ``LIVE_HORIZON_S`` (the hour-long carrier wait is not)."""
    if run.status in LIVE_STATUSES:
        return True
    if run.status != "waiting" or run.wait_kind not in LIVE_WAITS:
        return False
    if run.wait_kind == "timer":
        return run.wait_until is not None and (
            run.wait_until - timezone.now()).total_seconds() < LIVE_HORIZON_S
    return True


def users_seed() -> list[tuple[str, str, str, str]]:
    """Create the demo teams and users; return (username, password, role, team) for each.

    ``team`` is "" for a role held in every team (a Django group).
    """
    with transaction.atomic():
        teams = {slug: Team.objects.get_or_create(slug=slug, defaults={"name": name})[0]
                 for slug, name in DEMO_TEAMS}
        for username, role, password in DEMO_USERS:
            user = _demo_user(username, password, staff=role == ADMIN)
            user.groups.add(Group.objects.get_or_create(name=role)[0])
        for username, team, role, password in DEMO_TEAM_USERS:
            user = _demo_user(username, password, staff=False)
            membership_set(user=user, team=teams[team], role=role, actor="demo-seed")
    return [(u, p, r, "") for u, r, p in DEMO_USERS] + [
        (u, p, r, t) for u, t, r, p in DEMO_TEAM_USERS]


def _demo_user(username: str, password: str, *, staff: bool) -> User:
    user, _ = User.objects.get_or_create(username=username, defaults={"is_staff": staff})
    user.set_password(password)
    user.save(update_fields=["password"])
    return user


def runs_seed(*, drive_live: bool = False) -> dict[str, Run]:
    """Start every scenario's run and drive it in-process; return the runs by scenario name."""
    operator = User.objects.filter(username="operator").first()
    teams = {t.slug: t for t in Team.objects.filter(slug__in=set(AGENT_TEAMS.values()))}
    runs = {}
    for sc in SCENARIOS:
        key = f"demo:{sc.name}"
        if sc.live and not drive_live:
            key = _live_key(key)
        run = run_start(agent=sc.agent, goal=sc.goal,
                        input=live_input(sc) if sc.live else sc.input, budget=sc.budget,
                        idempotency_key=key, actor="demo-seed",
                        team=teams.get(AGENT_TEAMS[sc.agent]))
        if not sc.live or drive_live:
            run_drive(run)
        if sc.terminate and not run.is_terminal:
            terminate.execute(operator, run, reason="customer withdrew the return",
                              confirm=terminate.confirm_word)
            run.refresh_from_db()
        runs[sc.name] = run
    return runs


def _live_key(key: str) -> str:
    """The key itself while its run is live (or not made yet); else a fresh one for this launch."""
    earlier = (Run.objects.filter(Q(idempotency_key=key) | Q(idempotency_key__startswith=f"{key}:"))
               .order_by("-created_at").first())
    if earlier is None or (earlier.idempotency_key == key and is_live(earlier)):
        return key
    if is_live(earlier):
        return earlier.idempotency_key
    return f"{key}:{timezone.now():%Y%m%d-%H%M%S}"


def run_drive(run: Run, *, max_ticks: int = 200) -> str:
    """Tick ``run`` in this process until it stops being runnable; return its status."""
    for _ in range(max_ticks):
        run.refresh_from_db()
        if run.status not in RUNNABLE:
            break
        run_tick(run.pk, worker=WORKER)
    run.refresh_from_db()
    return run.status


def run_state(run: Run) -> str:
    """Return a run's state as scenarios name it: status[:wait kind or attention reason]."""
    if run.status == "waiting":
        return f"waiting:{run.wait_kind}"
    if run.status == "blocked":
        return f"blocked:{run.attention_reason}"
    return run.status


def demo_seed() -> tuple[list[tuple[str, str, str, str]], dict[str, Run]]:
    """Seed users and runs (idempotent: what exists is kept); return the logins and runs."""
    return users_seed(), runs_seed()
