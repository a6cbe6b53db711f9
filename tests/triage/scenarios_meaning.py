"""Issue 40 scenarios: a probe that found something else, refusals, failures by meaning."""
from __future__ import annotations

import urllib.error

from agentops.llm import protocol as p
from agentops.llm.scripted import call, say
from ledger import errors as le
from tests.triage.scenarios import reads, scenario, start
from tests.triage.world import world

PAYOUT = {"payout": [call("payout", to="c-1", amount=120), say("paid")]}


def _http(status: int) -> urllib.error.HTTPError:
    return urllib.error.HTTPError("https://carrier.example/labels", status, "refused", {}, None)


def _refusal() -> p.ModelReply:
    return p.ModelReply(text="", refusal="I can't help with that.", finish_reason="refusal",
                        usage=p.Usage(30, 5))


# --- a probe that found another effect under the call's key -----------------------------------


@scenario("unknown", "confirm_executed", ("terminate", "confirm_not_executed"),
          "amount: asked 120, found 210", "not what was asked")
def payout_probe_found_another_amount():
    world.payout_as["amount"] = 210
    return start("t-probe-diff", {**reads("check"), **PAYOUT})


@scenario("unknown", "confirm_executed", ("terminate", "confirm_not_executed"),
          "to: asked c-1, found c-9")
def payout_probe_found_another_recipient():
    world.payout_as["to"] = "c-9"
    return start("t-probe-to", {**reads("check"), **PAYOUT})


# --- a model that refuses ----------------------------------------------------------------------


@scenario("blocked", "skip", ("terminate", "retry"), "gets the same refusal", "rephrase the step")
def model_refuses_the_last_read_step():
    return start("t-refuse", {**reads("check"), "answer": [_refusal()] * 5})


@scenario("blocked", "rollback_terminate", ("terminate", "retry", "skip"), "skipping forgets the "
          "writes this step made (refund)", "Roll back and terminate undoes the 1")
def model_refuses_after_a_refund_in_the_step():
    return start("t-refuse-write", {**reads("check"),
                                    "refund": [call("refund", order="A-1"), _refusal()],
                                    "notify": [say("noted")]})


# --- permanent tool failures, by what they mean ------------------------------------------------


@scenario("blocked", "retry", ("terminate",), "label's backend refused our credentials",
          "fix the credential, then retry")
def carrier_refuses_our_api_key():
    world.fail_next["label"] = [_http(401)]
    return start("t-http-401", {**reads("check"), "label": [call("label", order="A-1"),
                                                           say("labelled")]})


@scenario("blocked", "restart", ("terminate", "skip", "retry"), "lookup says what it was asked "
          "for does not exist", "Restart from input starts the task again")
def order_lookup_answers_404():
    world.fail_next["lookup"] = [_http(404)]
    return start("t-http-404", {"check": [call("lookup", order="A-404"), say("checked")]})


@scenario("blocked", "retry", ("terminate", "skip"), "lookup's backend answered in a shape")
def order_lookup_answer_changed_shape():
    world.fail_next["lookup"] = [KeyError("amount")]
    return start("t-shape", {"check": [call("lookup", order="A-1"), say("checked")]})


@scenario("blocked", "terminate", ("retry",), "refused the request as invalid")
def refund_request_refused_as_invalid():
    world.fail_next["refund"] = [le.ToolRequestInvalid("HTTP 422: order id malformed")]
    return start("t-422", {**reads("check"), "refund": [call("refund", order="A-1"),
                                                       say("refunded")]})
