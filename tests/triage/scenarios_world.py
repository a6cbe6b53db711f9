"""The world changed while a run waited: a resource's version, the requester's right to run it."""
from __future__ import annotations

import datetime as dt

from django.contrib.auth.models import User

from agentops import clock
from agentops.llm.scripted import call, say
from approvals.actions import ACTIONS
from approvals.models import Approval
from ledger import errors as le
from runs.engine.runtime.recovery import runs_recover_expired
from runs.models import Run
from runs.services import run_start
from tests.conftest import drive
from tests.runs.waits_helpers import later
from tests.triage.scenarios import operator, reads, scenario
from tests.triage.world import agent, world

CATALOG = {"check": [call("catalog", sku="S-1"), say("S-1 listed")]}


def _started(name: str, script: dict) -> Run:
    agent(name, script)
    run = run_start(agent=name, goal=f"triage scenario {name}", actor=operator())
    drive(run)
    return run


@scenario("blocked", "retry", ("terminate",), "the world changed while this run waited",
          "check that the plan still holds")
def catalog_upgraded_while_the_worker_was_lost():
    world.fail_next["poll"] = [le.ToolRateLimited("429", next_retry_delay=3600)]
    run = _started("t-world-version", {**CATALOG, "track": [call("poll", ref="R-1"),
                                                            say("ok")]})
    Run.objects.filter(pk=run.pk).update(  # a worker took it, then died
        status="running", lease_owner="dead-worker",
        lease_expires_at=clock.now() - dt.timedelta(seconds=5), wait_kind="", wait_until=None)
    runs_recover_expired()
    world.catalog_version = "2026.12"
    drive(run)
    return run


@scenario("blocked", "retry", ("terminate",), "lost the right to run it", "retry as yourself")
def requester_deactivated_during_a_long_approval_wait():
    run = _started("t-world-requester", {**reads("check"),
                                         "pay": [call("pay", to="ACME", amount=30), say("paid")]})
    User.objects.filter(pk=operator().pk).update(is_active=False)  # left the company
    finance, _ = User.objects.get_or_create(username="triage-finance", is_superuser=True)
    with later(3600):
        approval = Approval.objects.get(run=run, status="pending")
        ACTIONS["approve"].execute(finance, approval, "", confirm="30")
        drive(run)
    return run
