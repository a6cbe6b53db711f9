"""Cells the first sets left empty: failure meanings on writes, with writes standing behind them.

Each crosses a failure meaning with the failing tool's effect class, what already stands
(a reversible refund, an irreversible email) and how far the run got.
"""
from __future__ import annotations

from agentops.llm.scripted import call, say
from ledger import errors as le
from tests.triage.scenarios import reads, scenario, start
from tests.triage.world import world

REFUND = {"refund": [call("refund", order="A-1"), say("refunded")]}
NOTIFY = {"notify": [call("email", to="c@example.com"), say("sent")]}
LABEL = {"label": [call("label", order="A-1"), say("labelled")]}


@scenario("blocked", "retry", ("terminate",), "refund's backend refused our credentials",
          "fix the credential, then retry", "2 of 3 steps done")
def credentials_refused_on_a_refund_after_an_email_went_out():
    world.fail_next["refund"] = [le.ToolCredentialsRefused("payments: API key revoked")]
    return start("c-cred-refund", {**reads("check"), **NOTIFY, **REFUND})


@scenario("blocked", "rollback_terminate", ("terminate", "restart", "skip", "retry"),
          "lookup says what it was asked for does not exist",
          "Roll back and terminate undoes the 1 reversible write(s)")
def not_found_on_a_read_after_a_refund_stands():
    world.fail_next["lookup"] = [le.ToolNotFound("no shipment for A-1")]
    return start("c-nf-after-refund", {**REFUND, "check": [call("lookup", order="A-1"),
                                                          say("checked")]})


@scenario("blocked", "terminate", ("retry",), "business grounds",
          "skipping drops the step's required write label (manual)",
          "email: this stays done whatever you press (nothing can undo it)")
def business_rejection_of_a_label_after_an_email_went_out():
    world.fail_next["label"] = [le.ToolBusinessRejection("carrier does not ship there")]
    return start("c-rej-label", {**reads("check"), **NOTIFY, **LABEL})


@scenario("blocked", "retry", ("terminate",), "answered in a shape its adapter does not read",
          "fix it, then retry", "3 of 4 steps done")
def api_changed_on_a_refund_when_most_is_done():
    world.fail_next["refund"] = [le.ToolApiChanged("payments: no refund_id in the answer")]
    return start("c-shape-late", {**reads("a", "b", "c"), **REFUND})


@scenario("blocked", "retry", ("rollback", "terminate"), "label's account lacks permission",
          "grant it, then retry", "which did not take effect")
def permission_refused_on_a_label_after_a_refund_stands():
    world.fail_next["label"] = [le.ToolPermissionDenied("carrier account may not print")]
    return start("c-perm-label", {**REFUND, **LABEL})


@scenario("blocked", "retry", ("terminate",), "rate-limiting", "1 of 2 steps done")
def rate_limit_outlasting_retries_on_a_refund():
    world.fail_next["refund"] = [le.ToolRateLimited("429", next_retry_delay=0)] * 10
    return start("c-rl-refund", {**reads("check"), **REFUND})


@scenario("blocked", "rollback_terminate", ("terminate", "retry"),
          "refused the request as invalid", "Roll back and terminate undoes the 1")
def request_refused_as_invalid_on_an_email_after_a_refund():
    world.fail_next["email"] = [le.ToolRequestInvalid("HTTP 422: address malformed")]
    return start("c-422-email", {**REFUND, **NOTIFY})


@scenario("blocked", "retry", ("terminate",), "down or timed out", "0 of 2 steps done",
          "it runs label, manual, which did not take effect")
def outage_on_a_label_at_the_start():
    world.fail_next["label"] = [le.ToolTransient("carrier 503")] * 10
    return start("c-outage-label", {**LABEL, **reads("check")})
