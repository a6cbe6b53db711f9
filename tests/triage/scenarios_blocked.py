"""Blocked-run scenarios: invalid output, loops, stalls, refusals, outages, versions, budgets."""
from __future__ import annotations

from agentops.agents import Budget, registry
from agentops.llm import protocol as p
from agentops.llm.scripted import call, say
from ledger import errors as le
from runs.services import run_start
from tests.conftest import drive
from tests.triage.scenarios import broken, polls, press, reads, scenario, start, stuck_or_done
from tests.triage.world import agent, world

# --- invalid model output: never a loop, retry the model -----------------------------------


@scenario("blocked", "retry", ("terminate",), "broken tool arguments", "asks the model again")
def broken_arguments_are_invalid_output_not_a_loop():
    return start("t-broken", {"refund": [broken()] * 20})


@scenario("blocked", "retry", ("terminate",), "3 of 4 steps done")
def broken_arguments_late_in_the_run():
    return start("t-broken-late", {**reads("a", "b", "c"), "refund": [broken()] * 20})


@scenario("blocked", "terminate", ("retry",), "a retry already failed the same way")
def broken_arguments_again_after_a_retry():
    return press("retry", start("t-broken-again", {"refund": [broken()] * 40}))


# --- loops -----------------------------------------------------------------------------------


@scenario("blocked", "skip", ("retry", "edit_plan", "rollback", "terminate"), "same call again")
def loop_on_the_last_read_step():
    return start("t-loop-last", {**reads("check"), "refund": [call("refund", order="A-1"),
                                                             say("refunded")],
                                 "track": polls()})


@scenario("blocked", "restart", ("terminate", "skip", "retry", "edit_plan"), "little is done yet",
          "no write of this run would be made again")
def loop_with_nothing_done_restarts():
    return start("t-loop-zero", {"track": polls()})


@scenario("blocked", "rollback_terminate", ("terminate", "retry", "edit_plan", "skip"),
          "skipping forgets the writes this step made (refund)",
          "Roll back and terminate undoes the 1 reversible write(s)")
def loop_after_a_refund_in_the_same_step():
    return start("t-loop-refund", {**reads("check"),
                                   "refund": [call("refund", order="A-1"), *polls()],
                                   "notify": [say("noted")]})


@scenario("blocked", "terminate", ("retry", "edit_plan", "skip"),
          "skipping runs refund: refund (idempotent)")
def loop_before_a_refund_step_known_from_history():
    script = {**reads("check"), "track": [call("poll", ref="R-1")] + [stuck_or_done] * 9,
              "refund": [call("refund", order="A-1"), say("refunded")]}
    assert start("t-loop-ahead", script).status == "succeeded"  # history: refund is ahead
    return start("t-loop-ahead", script, stuck=True)


@scenario("blocked", "retry", ("terminate", "edit_plan", "skip"), "fresh loop guards",
          "3 of 5 steps")
def loop_before_a_refund_when_most_is_done():
    script = {**reads("check", "quote", "verify"),
              "track": [call("poll", ref="R-1")] + [stuck_or_done] * 9,
              "refund": [call("refund", order="A-1"), say("refunded")]}
    assert start("t-loop-ahead-late", script).status == "succeeded"
    return start("t-loop-ahead-late", script, stuck=True)


@scenario("blocked", "skip", ("retry", "edit_plan", "terminate"), "same call again")
def loop_midway_with_no_history_of_later_steps():
    return start("t-loop-nohist", {**reads("check"), "track": polls(),
                                   "close": [say("closed")]})


@scenario("blocked", "skip", ("retry", "edit_plan", "terminate"), "without new facts")
def stall_on_the_last_step():
    return start("t-stall", {**reads("a", "b"), "watch": polls(12, same=False)})


# --- refusals ---------------------------------------------------------------------------------


@scenario("blocked", "retry", ("terminate", "skip"), "poll's account lacks permission",
          "grant it, then retry")
def permission_on_a_read_in_the_last_step():
    world.fail_next["poll"] = [le.ToolPermissionDenied("no access to carrier data")]
    return start("t-perm-read", {**reads("check"), "audit": [call("poll", ref="R-1"),
                                                            say("audited")]})


@scenario("blocked", "retry", ("terminate",), "email's account lacks permission",
          "grant it, then retry", "it runs email, irreversible, which did not take effect")
def permission_on_an_irreversible_write_midway():
    world.fail_next["email"] = [le.ToolPermissionDenied("mailer account may not send")]
    return start("t-perm-write", {**reads("check"),
                                  "notify": [call("email", to="c@example.com"), say("sent")],
                                  **reads("close")})


@scenario("blocked", "retry", ("terminate",), "grant it, then retry", "3 of 4 steps done",
          "it runs email, irreversible, which did not take effect")
def permission_on_a_write_when_most_is_done():
    world.fail_next["email"] = [le.ToolPermissionDenied("mailer account may not send")]
    return start("t-perm-late", {**reads("a", "b", "c"),
                                 "notify": [call("email", to="c@example.com"), say("sent")]})


@scenario("blocked", "restart", ("terminate", "retry", "skip"), "lookup says what it was asked "
          "for does not exist", "restart from a corrected input", "little is done yet (0%)")
def not_found_with_a_refund_ahead():
    script = {**reads("check"), "refund": [call("refund", order="A-1"), say("refunded")]}
    assert start("t-notfound", script).status == "succeeded"
    world.fail_next["lookup"] = [le.ToolNotFound("no order A-1")]
    return start("t-notfound", script)


@scenario("blocked", "terminate", ("retry",), "business grounds",
          "skipping drops the step's required write refund")
def business_rejection_of_a_refund():
    world.fail_next["refund"] = [le.ToolBusinessRejection("refund window closed")]
    return start("t-reject", {**reads("check", "quote"),
                              "refund": [call("refund", order="A-1"), say("refunded")]})


# --- rate limits and outages -----------------------------------------------------------------


@scenario("blocked", "retry", ("skip", "terminate"), "rate-limiting", "1 of 2 steps done")
def rate_limit_outlasting_retries_on_a_read():
    world.fail_next["poll"] = [le.ToolRateLimited("429", next_retry_delay=0)] * 10
    return start("t-rl", {**reads("check"), "track": [call("poll", ref="R-1"), say("ok")]})


@scenario("blocked", "retry", ("terminate",), "down or timed out")
def outage_on_an_idempotent_write():
    world.fail_next["refund"] = [le.ToolTransient("503")] * 10
    return start("t-outage", {**reads("check"),
                              "refund": [call("refund", order="A-1"), say("refunded")]})


@scenario("blocked", "terminate", ("retry",), "a retry already failed the same way")
def outage_again_after_a_retry():
    world.fail_next["refund"] = [le.ToolTransient("503")] * 30
    return press("retry", start("t-outage-again", {
        **reads("check"), "refund": [call("refund", order="A-1"), say("refunded")]}))


@scenario("blocked", "retry", ("skip", "terminate"), "down or timed out")
def model_provider_outage():
    return start("t-model-down", {**reads("check"), "answer": [p.ServerError("503")] * 20})


@scenario("blocked", "retry", ("terminate",), "credentials")
def model_credentials_refused():
    return start("t-model-auth", {**reads("check"), "answer": [p.AuthError("401")] * 5})


# --- versions and budgets --------------------------------------------------------------------


def _pinned_then_gone(name: str, *, deploy_v2: bool):
    script = {**reads("check"), "close": [say("closed")]}
    agent(name, script)
    run = run_start(agent=name, goal="version scenario")
    registry._agents.pop((name, "1"))
    if deploy_v2:
        agent(name, script, version="2")
    drive(run)
    return run


@scenario("blocked", "fork_deployed", ("terminate",), "continue on the deployed version 2")
def version_gone_with_a_newer_version_deployed():
    return _pinned_then_gone("t-version", deploy_v2=True)


@scenario("blocked", "terminate", (), "no version of the agent is deployed")
def version_gone_with_nothing_deployed():
    run = _pinned_then_gone("t-version-none", deploy_v2=False)
    registry._latest.pop("t-version-none", None)
    return run


@scenario("blocked", "terminate", ("raise_budget",), "0 of 2 steps done", "rarely finishes")
def budget_used_up_before_the_first_step_ends():
    return start("t-budget-early", {"check": [call("lookup", order="A-1"),
                                              call("lookup", order="A-2"), say("ok")],
                                    **reads("close")}, budget=Budget(tool_calls=1))


@scenario("blocked", "raise_budget", ("terminate",), "1 of 2 steps done", "finish the rest")
def budget_used_up_halfway():
    return start("t-budget-late", {**reads("check", "close")}, budget=Budget(tool_calls=2))


# --- the run's failure budget: failed attempts across steps, not per step -------------------


@scenario("blocked", "retry", ("terminate", "skip"), "past its failure budget",
          "fresh failure allowance", "3 of 5 steps done")
def failures_across_steps_use_up_the_failure_budget():
    # Each step's lookup fails once, then succeeds: no step reaches its own retry limit,
    # but the fourth failed attempt of the run reaches its failure budget of 4.
    world.fail_next["lookup"] = [le.ToolTransient("inventory hiccup"), None] * 4
    return start("t-failures", reads("a", "b", "c", "d", "e"), budget=Budget(failures=4))
