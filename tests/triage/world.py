"""A fault-injecting outside world for the triage scenarios: orders, refunds, labels, emails.

Faults are queued per tool (``world.fail_next``), a write can time out after it happened
(``world.timeout_after``), and the label service's probe can be down (``world.probe_down``).
Every side effect is recorded with its idempotency key, so a scenario can count repeats.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentops.agents import Agent, Budget, StepSpec, registry
from agentops.llm.scripted import ScriptedModel
from agentops.tools import ToolResult, tool
from ledger.errors import ToolTimeout


@dataclass
class World:
    """Effects that happened and the faults to inject next."""

    effects: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    fail_next: dict[str, list[BaseException]] = field(default_factory=dict)
    timeout_after: set[str] = field(default_factory=set)
    probe_down: bool = False
    payout_as: dict[str, Any] = field(default_factory=dict)  # the bank records other values
    catalog_version: str = "2026.11"  # what the catalog's version probe answers

    def reset(self) -> None:
        self.catalog_version = "2026.11"
        self.payout_as.clear()
        self.effects.clear()
        self.fail_next.clear()
        self.timeout_after.clear()
        self.probe_down = False

    def fault(self, name: str) -> None:
        queue = self.fail_next.get(name) or []
        if queue and (fault := queue.pop(0)) is not None:  # None: this call succeeds
            raise fault

    def did(self, name: str, key: str, args: dict[str, Any]) -> None:
        self.effects.append((name, key, args))
        if name in self.timeout_after:
            self.timeout_after.discard(name)
            raise ToolTimeout(f"{name}: no answer in time (it may have happened)")

    def count(self, name: str) -> int:
        return sum(1 for t, _, _ in self.effects if t == name)


world = World()


@tool(effect="read")
def lookup(ctx, order: str) -> ToolResult:
    """Look an order up."""
    world.fault("lookup")
    return ToolResult(facts={"order": order, "amount": 40}, summary=f"order {order}: 40 EUR")


@tool(effect="read")
def poll(ctx, ref: str) -> ToolResult:
    """Check a carrier status that never changes."""
    world.fault("poll")
    return ToolResult(facts={"state": "pending"}, summary="still pending")


def _undo_refund(ctx, facts, order: str) -> ToolResult:
    world.did("unrefund", ctx.idempotency_key, {"order": order})
    return ToolResult(facts={"unrefunded": order})


@tool(effect="write", idempotent=True, reversibility="reversible", compensate=_undo_refund)
def refund(ctx, order: str) -> ToolResult:
    """Refund an order (the payment API deduplicates by key; a refund can be reversed)."""
    world.fault("refund")
    if not any(k == ctx.idempotency_key for t, k, _ in world.effects if t == "refund"):
        world.did("refund", ctx.idempotency_key, {"order": order})
    return ToolResult(facts={"refunded": order}, summary=f"refunded {order}")


def _probe_label(ctx, order: str) -> ToolResult | None:
    if world.probe_down:
        raise ConnectionError("label service status endpoint unreachable")
    found = any(t == "label" and k == ctx.idempotency_key for t, k, _ in world.effects)
    return ToolResult(facts={"label": order}, summary="label exists (probed)") if found else None


@tool(effect="write", probe=_probe_label, reversibility="manual", timeout=30)
def label(ctx, order: str) -> ToolResult:
    """Print a return label (not idempotent; the label service can be asked whether it did)."""
    world.fault("label")
    world.did("label", ctx.idempotency_key, {"order": order})
    return ToolResult(facts={"label": order}, summary=f"label for {order}")


@tool(effect="write", reversibility="irreversible", timeout=20)
def email(ctx, to: str) -> ToolResult:
    """Email the customer (no key, no probe: never safe to repeat)."""
    world.fault("email")
    world.did("email", ctx.idempotency_key, {"to": to})
    return ToolResult(facts={"sent_to": to}, summary=f"emailed {to}")


@tool(effect="write", reversibility="manual", approval="always",
      approval_on_expiry="escalate")
def pay(ctx, to: str, amount: int) -> ToolResult:
    """Pay someone (a person approves every payment; unanswered approvals escalate)."""
    world.did("pay", ctx.idempotency_key, {"to": to, "amount": amount})
    return ToolResult(facts={"paid": amount}, summary=f"paid {amount} to {to}")


def _probe_payout(ctx, to: str, amount: int) -> ToolResult | None:
    found = [a for t, k, a in world.effects if t == "payout" and k == ctx.idempotency_key]
    return ToolResult(facts=dict(found[0]), summary="payout exists (probed)") if found else None


@tool(effect="write", idempotent=True, probe=_probe_payout, reversibility="manual", timeout=30)
def payout(ctx, to: str, amount: int) -> ToolResult:
    """Pay out (the bank deduplicates by key and can be asked what it paid under a key)."""
    world.fault("payout")
    if not any(k == ctx.idempotency_key for t, k, _ in world.effects if t == "payout"):
        world.effects.append(("payout", ctx.idempotency_key,
                              {"to": to, "amount": amount, **world.payout_as}))
    raise ToolTimeout("payout: no answer in time (it may have been paid)")


@tool(effect="read", version_probe=lambda: world.catalog_version)
def catalog(ctx, sku: str) -> ToolResult:
    """Read a product from the catalog (its API has versions; runs re-check them)."""
    return ToolResult(facts={"sku": sku, "version": world.catalog_version},
                      summary=f"{sku} in catalog {world.catalog_version}")


TOOLS = [lookup, poll, refund, label, email, pay, payout, catalog]


def agent(name: str, script: dict[str, list[Any]], *, version: str = "1",
          budget: Budget | None = None) -> Agent:
    """Register a scripted agent whose plan is the script's steps, in order."""
    return registry.register(Agent(
        name=name, version=version, system_prompt="You handle returns.", tools=TOOLS,
        plan=[StepSpec(k) for k in script], model=lambda: ScriptedModel(script),
        budget=budget or Budget()))
