"""Agents for the chaos and race tests: their side effects land in a plain SQL table.

Worker processes import this module (AGENTOPS_AGENTS=tests.chaos_agents), so an effect made
by any process is visible to the test. ``charge`` honours its idempotency key (a unique
index); ``ship`` is not idempotent but probeable; ``email`` is neither — a repeat of it would
show as two rows with the same key.
"""
from __future__ import annotations

import random
import time

from django.db import connection

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from ledger.errors import ToolTransient

TABLE = "chaos_world"
SLOW = (0.1, 0.7)


def world_create() -> None:
    """Create the world table (tests only; not a model)."""
    with connection.cursor() as cur:
        cur.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id bigserial PRIMARY KEY, "
                    "tool text NOT NULL, key text NOT NULL, arg text NOT NULL, "
                    "at timestamptz NOT NULL DEFAULT now())")
        cur.execute(f"CREATE UNIQUE INDEX IF NOT EXISTS {TABLE}_charge_key ON {TABLE} (key) "
                    "WHERE tool = 'charge'")


def world_drop() -> None:
    """Drop the world table."""
    with connection.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {TABLE}")


def world_rows() -> list[tuple[str, str, str]]:
    """Return every effect as (tool, key, arg)."""
    with connection.cursor() as cur:
        cur.execute(f"SELECT tool, key, arg FROM {TABLE} ORDER BY id")
        return list(cur.fetchall())


def _effect(tool_name: str, key: str, arg: str, *, unique: bool = False,
            deadline=None) -> None:
    """Record an effect; with ``deadline`` the world refuses it once that has passed.

    Like a service honouring a request deadline (gRPC, most payment APIs): a write that a
    paused worker sends after its attempt's hard deadline is refused, never applied late.
    """
    with connection.cursor() as cur:
        conflict = " ON CONFLICT (key) WHERE tool = 'charge' DO NOTHING" if unique else ""
        cur.execute(f"INSERT INTO {TABLE} (tool, key, arg) SELECT %s, %s, %s "
                    f"WHERE %s::timestamptz IS NULL OR now() < %s::timestamptz{conflict}",
                    [tool_name, key, arg, deadline, deadline])
        if not cur.rowcount and deadline is not None and not unique:
            raise ToolTransient(f"{tool_name}: the request's deadline passed; nothing done")


def _pause() -> None:
    time.sleep(random.uniform(*SLOW))


@tool(effect="read")
def inspect(ctx, item: str) -> ToolResult:
    """Look an item up (slowly)."""
    _pause()
    return ToolResult(facts={"item": item, "ok": True}, summary=f"{item} looks fine")


@tool(effect="write", idempotent=True)
def charge(ctx, order: str) -> ToolResult:
    """Charge an order; the payment API deduplicates by idempotency key."""
    _effect("charge", ctx.idempotency_key, f"{ctx.run_id}:{order}", unique=True)
    _pause()
    return ToolResult(facts={"charged": order}, summary=f"charged {order}")


def _probe_ship(ctx, order: str) -> ToolResult | None:
    with connection.cursor() as cur:
        cur.execute(f"SELECT 1 FROM {TABLE} WHERE tool = 'ship' AND key = %s",
                    [ctx.idempotency_key])
        found = cur.fetchone()
    return ToolResult(facts={"shipped": order}, summary="shipped (probed)") if found else None


@tool(effect="write", probe=_probe_ship, reversibility="manual")
def ship(ctx, order: str) -> ToolResult:
    """Ship an order (not idempotent; the warehouse can be asked whether it shipped)."""
    _pause()
    _effect("ship", ctx.idempotency_key, f"{ctx.run_id}:{order}", deadline=ctx.deadline)
    _pause()
    return ToolResult(facts={"shipped": order}, summary=f"shipped {order}")


@tool(effect="write", reversibility="irreversible")
def email(ctx, to: str) -> ToolResult:
    """Send an email (no key, no probe: never safe to repeat)."""
    _pause()
    _effect("email", ctx.idempotency_key, f"{ctx.run_id}:{to}", deadline=ctx.deadline)
    _pause()
    return ToolResult(facts={"sent_to": to}, summary=f"emailed {to}")


@tool(effect="write", idempotent=True, approval="always", approval_on_expiry="deny")
def refund(ctx, order: str) -> ToolResult:
    """Refund an order (a person approves first)."""
    _effect("charge", ctx.idempotency_key, f"{ctx.run_id}:refund:{order}", unique=True)
    _pause()
    return ToolResult(facts={"refunded": order}, summary=f"refunded {order}")


@tool(effect="read")
def hang(ctx, marker: str) -> ToolResult:
    """Hang (ignoring cancellation, declaring no timeout) on the first call; answer after."""
    import os

    if not os.path.exists(marker):
        open(marker, "w").close()  # noqa: SIM115
        time.sleep(3600)
    return ToolResult(facts={"marker": marker}, summary="answered")


@tool(effect="read")
def beat_slowly(ctx, seconds: float) -> ToolResult:
    """Take ``seconds`` (past the default timeout), calling ctx.heartbeat() twice a second."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        ctx.heartbeat()
        time.sleep(0.5)
    return ToolResult(facts={"took": seconds}, summary="slow but alive")


TOOLS = [inspect, charge, ship, email, refund, hang, beat_slowly]


def _order(tool_name: str, **extra: str):
    return lambda sc: call(tool_name, order=sc.input.get("order", "o"), **extra)


SCRIPTS = {
    "chaos_read": {"look": [call("inspect", item="a"), call("inspect", item="b"), say("ok")]},
    "chaos_idem": {"pay": [_order("charge"), say("paid")]},
    "chaos_probe": {"ship": [_order("ship"), say("shipped")]},
    "chaos_unsafe": {"notify": [lambda sc: call("email", to=sc.input.get("order", "o")),
                                say("sent")]},
    "chaos_approval": {"refund": [_order("refund"), say("refund handled")]},
    "chaos_hang": {"wait": [lambda sc: call("hang", marker=sc.input["marker"]), say("ok")]},
    "chaos_beat": {"wait": [lambda sc: call("beat_slowly", seconds=sc.input["seconds"]),
                            say("ok")]},
    "chaos_mixed": {"look": [call("inspect", item="x"), say("ok")],
                    "pay": [_order("charge"), say("paid")],
                    "ship": [_order("ship"), say("shipped")],
                    "notify": [lambda sc: call("email", to=sc.input.get("order", "o")),
                               say("sent")]},
}


def _busy(sc):
    """Keep a worker busy: a slow read per turn for ``turns`` turns."""
    turns = int(sc.input.get("turns", 20))
    return call("inspect", item=f"busy {sc.turn}") if sc.turn <= turns else say("done")


def _register() -> None:
    registry.register(Agent(name="chaos_busy", version="1", system_prompt="chaos test agent",
                            tools=TOOLS, plan=[StepSpec("work")], max_turns_per_step=1000,
                            model=lambda: ScriptedModel({"work": [_busy] * 1000})))
    for name, script in SCRIPTS.items():
        registry.register(Agent(
            name=name, version="1", system_prompt="chaos test agent", tools=TOOLS,
            plan=[StepSpec(k) for k in script], model=lambda s=script: ScriptedModel(s)))


_register()
