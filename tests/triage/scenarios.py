"""The labelled triage scenarios: each is produced through the engine, with its expected answer.

A scenario function starts a run of a scripted agent against the fault-injecting world
(tests/triage/world.py), drives it with the real loop (and, where the story needs it, presses
operator buttons through the actions), and returns the run. ``LABELS`` holds what a careful
operator would do: the recommended action, the alternatives in order, and words the why must
contain. docs/triage.md shows the same table.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group, User

from agentops.agents import Budget, registry
from agentops.llm import protocol as p
from agentops.llm.scripted import call, say
from approvals.actions import ACTIONS
from runs.models import Run
from runs.services import run_start
from tests.conftest import drive
from tests.triage.world import agent


@dataclass(frozen=True)
class Label:
    """What a careful operator would do about a scenario's run."""

    status: str
    action: str
    alternatives: tuple[str, ...]
    why: tuple[str, ...] = ()


SCENARIOS: dict[str, tuple[Callable[[], Run], Label]] = {}


def scenario(status: str, action: str, alternatives: tuple[str, ...], *why: str):
    """Register the decorated function as a scenario with its label."""
    def register(fn: Callable[[], Run]) -> Callable[[], Run]:
        SCENARIOS[fn.__name__] = (fn, Label(status, action, alternatives, why))
        return fn
    return register


def _label(verb: str) -> str:
    return ACTIONS[verb].label if verb in ACTIONS else "Let it wait"


def table() -> str:
    """Return docs/triage.md's scenario table, rendered from the labels (by module and line)."""
    rows = ["| Scenario | Stops as | Recommended | Alternatives |", "|---|---|---|---|"]
    order = sorted(SCENARIOS.items(), key=lambda kv: (kv[1][0].__module__,
                                                        kv[1][0].__code__.co_firstlineno))
    for name, (_, label) in order:
        rest = ", ".join(_label(v) for v in label.alternatives) or "—"
        rows.append(f"| {name.replace('_', ' ')} | {label.status} | {_label(label.action)} "
                    f"| {rest} |")
    return "\n".join(rows) + "\n"


def operator() -> User:
    """Return the scenarios' operator (created once per test)."""
    user, _ = User.objects.get_or_create(username="triage-op")
    user.groups.add(Group.objects.get_or_create(name="operators")[0])
    return user


def press(verb: str, run: Run, reason: str = "triage scenario") -> Run:
    """Press ``verb`` on ``run`` as the operator, then drive the run on."""
    run.refresh_from_db()
    ACTIONS[verb].execute(operator(), run, reason, confirm=ACTIONS[verb].confirm_word)
    drive(run)
    return run


def start(name: str, script: dict[str, list[Any]], *, budget: Budget | None = None,
          **input: Any) -> Run:
    """Register ``name`` with ``script`` (its steps are the plan), start a run and drive it."""
    if not registry.has(name, "1"):
        agent(name, script, budget=budget)
    run = run_start(agent=name, goal=f"triage scenario {name}", input=input)
    drive(run)
    return run


def broken(tool: str = "refund") -> p.ModelReply:
    """Return a reply whose tool arguments are not JSON (the model's output is broken)."""
    req = p.ToolCallRequest(name=tool, arguments=None, raw_arguments='{"order": "A-1", ')
    return p.ModelReply(tool_calls=(req,), usage=p.Usage(50, 10), finish_reason="tool_calls")


def reads(*steps: str) -> dict[str, list[Any]]:
    """Return steps that each look an order up and finish."""
    return {s: [call("lookup", order="A-1"), say(f"{s} done")] for s in steps}


def polls(n: int = 10, *, same: bool = True) -> list[Any]:
    """Return a step's turns polling the carrier ``n`` times (same ref: a loop; else a stall)."""
    return [call("poll", ref="R-1" if same else f"R-{i}") for i in range(n)] + [say("tracked")]


def stuck_or_done(sc) -> Any:
    """Poll again when the run's input says it is stuck, else finish the step."""
    return call("poll", ref="R-1") if sc.input.get("stuck") else say("tracked")

