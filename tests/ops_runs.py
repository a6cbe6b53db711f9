"""Real engine runs for the operator work of issue 21: a blocked run after a refund (rollback),
a loop, a stall and a tool call backing off. Each is made by the real loop with the
scripted model and tests.engine_agents' world; use with the ``engine`` fixture."""
from __future__ import annotations

from typing import Any

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.protocol import RateLimited
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from ledger.errors import ToolPermissionDenied, ToolTransient
from runs.models import Run
from runs.services import run_start
from tests.conftest import drive
from tests.engine_agents import TOOLS, world


def _unrefund(ctx, facts, order: str, amount: int) -> ToolResult:
    world.did("unrefund", ctx.idempotency_key, {"order": order, "amount": amount})
    return ToolResult(facts={"reversed": amount})


@tool(effect="write", idempotent=True, reversibility="reversible", compensate=_unrefund)
def refund(ctx, order: str, amount: int) -> ToolResult:
    """Refund a customer (idempotent by key; reversed by a chargeback)."""
    world.did("refund", ctx.idempotency_key, {"order": order, "amount": amount})
    return ToolResult(facts={"refunded": amount, "order": order},
                      summary=f"refunded {amount} EUR on {order}")


def _agent(name: str, script: dict, plan: list[tuple[str, str]], **kw: Any) -> None:
    registry.register(Agent(
        name=name, version="1", system_prompt="You are a test agent.",
        tools=[*TOOLS, refund], plan=[StepSpec(k, title=t) for k, t in plan],
        model=lambda: ScriptedModel(script), **kw))


def refund_then_blocked(name: str = "ops-refunder") -> Run:
    """Blocked in step 3 (notify) after step 2 (refund_customer) refunded 250 EUR (reversible)
    and emailed the customer (irreversible: a rollback lists it to be handled by hand)."""
    world.fail_next["lookup"] = [ToolPermissionDenied("no access to the mail region")]
    _agent(name, {"check": [call("poll", ref="return-policy"), say("eligible")],
                  "refund_customer": [call("refund", order="A-2002", amount=250),
                                      call("email", to="a2002@example.com"),
                                      say("refunded")],
                  "notify": [call("lookup", item="mail-template"), say("sent")]},
           [("check", "Check the policy"), ("refund_customer", "Refund the customer"),
            ("notify", "Tell the customer")])
    run = run_start(agent=name, goal="Refund order A-2002 (250 EUR)")
    assert drive(run) == "blocked"
    return run


def looping(name: str = "ops-looper") -> Run:
    """Blocked as a loop: lookup(item="A-7") asked for three times in step track."""
    _agent(name, {"track": [call("lookup", item="A-7")] * 4 + [say("done")]},
           [("track", "Track the parcel")])
    run = run_start(agent=name, goal="Track parcel A-7")
    assert drive(run) == "blocked" and run.attention_reason == "loop_detected"
    return run


def stalled(name: str = "ops-staller") -> Run:
    """Blocked as a stall: poll(ref) answers the same facts round after round."""
    _agent(name, {"export": [call("poll", ref=f"export-{n}") for n in range(1, 9)]
                  + [say("done")]},
           [("export", "Wait for the export")])
    run = run_start(agent=name, goal="Export the ledger")
    assert drive(run) == "blocked" and run.attention_reason == "stalled"
    return run


def backing_off(name: str = "ops-backoff", delay_s: float = 300) -> Run:
    """Waiting on a timer: lookup answered 503 and asked to be retried in ``delay_s``."""
    world.fail_next["lookup"] = [ToolTransient("backend answered 503",
                                               next_retry_delay=delay_s)]
    _agent(name, {"quote": [call("lookup", item="book"), say("quoted")]},
           [("quote", "Quote the price")])
    run = run_start(agent=name, goal="Quote a book")
    assert drive(run) == "waiting" and run.wait_kind == "timer"
    return run


def model_backing_off(name: str = "ops-model-backoff", delay_s: float = 120) -> Run:
    """Waiting on a timer: the model provider answered 429 with Retry-After ``delay_s``."""
    _agent(name, {"quote": [RateLimited("slow down", retry_after=delay_s), say("quoted")]},
           [("quote", "Quote the price")])
    run = run_start(agent=name, goal="Quote a pen")
    assert drive(run) == "waiting" and run.wait_kind == "timer"
    return run


def out_of_turns(name: str = "ops-turns") -> Run:
    """Blocked by the turn limit (3 turns): each lookup found something new, none finished."""
    _agent(name, {"survey": [call("lookup", item=f"shop-{n}") for n in range(1, 6)]
                  + [say("done")]},
           [("survey", "Survey the shops")], max_turns_per_step=3)
    run = run_start(agent=name, goal="Survey prices")
    assert drive(run) == "blocked" and run.attention_reason == "loop_detected"
    return run


def planned_then_blocked(name: str = "ops-planner") -> Run:
    """Blocked in step 1 of 5 (lookup refused): four steps still to run, a plan to edit."""
    world.fail_next["lookup"] = [ToolPermissionDenied("no access to region eu")]
    _agent(name, {"check": [call("lookup", item="eu"), say("checked")],
                  "pack": [say("packed")], "label": [say("labelled")],
                  "ship": [say("shipped")], "notify": [say("told")]},
           [("check", "Check the stock"), ("pack", "Pack the order"),
            ("label", "Print the label"), ("ship", "Ship the parcel"),
            ("notify", "Tell the customer")])
    run = run_start(agent=name, goal="Ship order A-3003")
    assert drive(run) == "blocked"
    return run
