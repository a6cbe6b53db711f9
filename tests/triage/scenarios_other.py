"""Unknown-outcome, approval, recovery and wait scenarios."""
from __future__ import annotations

import datetime as dt

from agentops import clock
from agentops.llm import protocol as p
from agentops.llm.scripted import call, say
from approvals.models import Approval
from approvals.services import approvals_expire_due
from ledger import errors as le
from runs.engine.runtime.recovery import runs_recover_expired
from runs.models import Run
from tests.triage.scenarios import press, reads, scenario, start
from tests.triage.world import world

NOTIFY = {"notify": [call("email", to="c@example.com"), say("sent")]}
LABEL = {"label": [call("label", order="A-1"), say("labelled")]}

# --- writes whose outcome is unknown: which confirmation the evidence favours ----------------


@scenario("unknown", "confirm_executed", ("confirm_not_executed", "terminate"),
          "It executed is likelier", "timed out", "no idempotency key and no probe")
def email_timed_out_after_sending():
    world.timeout_after.add("email")
    return start("t-amb-email", {**reads("check"), **NOTIFY})


@scenario("unknown", "confirm_executed", ("confirm_not_executed", "terminate"),
          "its probe could not be reached")
def label_timed_out_and_its_probe_is_down():
    world.timeout_after.add("label")
    world.probe_down = True
    run = start("t-amb-probe", {**reads("check"), **LABEL})
    assert "its probe could not be reached" in run.attention_detail
    return run


@scenario("unknown", "confirm_not_executed", ("confirm_executed", "terminate"),
          "It did not execute is likelier", "connection failed after")
def email_connection_refused_at_once():
    world.fail_next["email"] = [ConnectionError("connection refused")]
    return start("t-amb-refused", {**reads("check"), **NOTIFY})


@scenario("unknown", "confirm_not_executed", ("confirm_executed", "terminate"),
          "3 of 3 earlier unknown email calls were confirmed not executed")
def email_timeout_where_history_says_it_never_went_out():
    script = {**reads("check"), **NOTIFY}
    for _ in range(3):
        world.fail_next["email"] = [le.ToolTimeout("mailer timed out")]
        run = start("t-amb-history", script)
        press("confirm_not_executed", run, "mailer log shows nothing sent")
    world.timeout_after.add("email")
    return start("t-amb-history", script)


@scenario("unknown", "terminate", ("confirm_executed", "confirm_not_executed"),
          "went unknown again after a person confirmed it did not execute")
def email_unknown_again_after_confirmed_not_executed():
    world.fail_next["email"] = [le.ToolTimeout("mailer timed out")] * 2
    run = start("t-amb-again", {**reads("check"), **NOTIFY})
    return press("confirm_not_executed", run, "mailer log shows nothing sent")


@scenario("unknown", "confirm_executed", ("confirm_not_executed", "rollback", "terminate"),
          "It executed is likelier")
def email_unknown_after_a_reversible_refund():
    world.timeout_after.add("email")
    return start("t-amb-refund", {"refund": [call("refund", order="A-1"), say("refunded")],
                                  **NOTIFY})


# --- approvals, recovery ---------------------------------------------------------------------


def _expire_approvals(run: Run) -> None:
    Approval.objects.filter(run=run, status="pending").update(
        expires_at=clock.now() - dt.timedelta(seconds=1))
    approvals_expire_due()
    run.refresh_from_db()


PAY = {"pay": [call("pay", to="supplier", amount=120), say("paid")]}


@scenario("blocked", "retry", ("terminate",), "nobody decided the approval in time",
          "asks for the approval again")
def payment_approval_expired():
    run = start("t-approval", {**reads("check"), **PAY})
    assert run.status == "waiting"
    _expire_approvals(run)
    return run


@scenario("blocked", "terminate", ("retry",), "a retry already failed the same way")
def payment_approval_expired_twice():
    run = start("t-approval-twice", {**reads("check"), **PAY})
    _expire_approvals(run)
    press("retry", run, "ask finance again")
    _expire_approvals(run)
    return run


def _worker_died_too_often(run: Run) -> Run:
    Run.objects.filter(pk=run.pk).update(
        status="running", lease_owner="dead-worker", recoveries=run.recovery_limit,
        lease_expires_at=clock.now() - dt.timedelta(seconds=5), wait_kind="", wait_until=None)
    runs_recover_expired()
    run.refresh_from_db()
    return run


@scenario("blocked", "retry", ("terminate",), "workers died", "1 of 2 steps done")
def workers_died_halfway():
    world.fail_next["poll"] = [le.ToolRateLimited("429", next_retry_delay=3600)]
    run = start("t-recovery", {**reads("check"), "track": [call("poll", ref="R-1"),
                                                           say("ok")]})
    return _worker_died_too_often(run)


@scenario("blocked", "restart", ("terminate", "retry"), "little is done yet")
def workers_died_at_the_start():
    world.fail_next["poll"] = [le.ToolRateLimited("429", next_retry_delay=3600)]
    run = start("t-recovery-early", {"track": [call("poll", ref="R-1"), say("ok")],
                                     **reads("close")})
    return _worker_died_too_often(run)


# --- timer waits: why, until when, wake now --------------------------------------------------


@scenario("waiting", "wait", ("wake", "terminate"), "retry poll after rate_limited", "UTC",
          "Wake now")
def carrier_rate_limit_with_retry_after_an_hour():
    world.fail_next["poll"] = [le.ToolRateLimited("429", next_retry_delay=3600)]
    return start("t-wait-tool", {**reads("check"), "track": [call("poll", ref="R-1"),
                                                            say("ok")]})


@scenario("waiting", "wait", ("wake", "terminate"), "backoff after rate_limited")
def model_rate_limit_with_retry_after():
    return start("t-wait-model", {**reads("check"),
                                  "answer": [p.RateLimited("429", retry_after=600), say("ok")]})
