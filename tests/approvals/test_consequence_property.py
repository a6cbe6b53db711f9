"""The proof of issue 31 (Build 4): every press does to the world what its preview said.

Generated over effect class × fault point × action × "then": a run over the demo world (its
tools record each effect in agentops.demo.world with its key, the faults come from the run's
input as in the demo) stops where the fault puts it; the action is pressed through the bound
action the console holds (check, typed confirmation, service, audit); the engine finishes the
run in-process; and the world's effect counts are checked against the preview's lines:

- every effect a line says is undone was reversed, and nothing else was;
- no effect happened twice under one key unless a line said it may (``may_repeat``) and the
  person typed the confirmation — pressed without it, the action is refused and nothing moves;
- an effect a line says stands is still there, not reversed;
- a write makes a new effect (a new key) only where a line said it runs or may be made anew.
"""
from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import pytest

from agentops.agents import Agent, StepSpec, registry
from agentops.demo import world
from agentops.demo.models import WorldEffect
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolContext, ToolResult, tool
from approvals.actions import RUN_ACTIONS
from approvals.actions.base import bind
from approvals.errors import ActionNotApplicable, ConfirmationRequired, NotAllowed
from runs.models import Event, Run
from runs.services import run_start
from tests.conftest import drive

pytestmark = pytest.mark.django_db


def _write(ctx: ToolContext, name: str, item: str, *, keyed: bool) -> ToolResult:
    world.fault_before(ctx, name)
    effect, _ = world.effect_record(kind=name, key=ctx.idempotency_key, run_id=ctx.run_id,
                                    data={"item": item}, idempotent=keyed)
    world.fault_after(ctx, name)
    return ToolResult(facts={"done": item, "effect": effect.pk}, summary=f"{name} {item}")


@tool(effect="read")
def read_stock(ctx: ToolContext, item: str) -> ToolResult:
    """Read the stock of an item."""
    world.fault_before(ctx, f"read_stock:{item}")  # the finish step reads "final"
    world.fault_after(ctx, f"read_stock:{item}")
    return ToolResult(facts={"item": item, "stock": 3}, summary=f"{item}: 3")


@tool(effect="write", idempotent=True)
def keyed_write(ctx: ToolContext, item: str) -> ToolResult:
    """Book an item (the backend deduplicates on the key)."""
    return _write(ctx, "keyed_write", item, keyed=True)


def _probe(ctx: ToolContext, item: str) -> ToolResult | None:
    found = world.effect_find(kind="probe_write", key=ctx.idempotency_key)
    return None if found is None else ToolResult(facts={"done": item}, summary="found")


@tool(effect="write", probe=_probe)
def probe_write(ctx: ToolContext, item: str) -> ToolResult:
    """Ship an item (no key, but the world can be asked whether it shipped)."""
    return _write(ctx, "probe_write", item, keyed=False)


def _undo(ctx: ToolContext, facts: dict[str, Any], item: str) -> ToolResult:
    world.effect_record(kind="undo_write.reversed", key=ctx.original_key, run_id=ctx.run_id,
                        data={"item": item}, idempotent=True)
    return ToolResult(facts={"undone": item})


@tool(effect="write", compensate=_undo)
def undo_write(ctx: ToolContext, item: str) -> ToolResult:
    """Reserve an item (no key; a compensation releases it)."""
    return _write(ctx, "undo_write", item, keyed=False)


@tool(effect="write")
def plain_write(ctx: ToolContext, item: str) -> ToolResult:
    """Email about an item (no key, no probe, nothing undoes it)."""
    return _write(ctx, "plain_write", item, keyed=False)


TOOLS = {"read": read_stock, "idempotent": keyed_write, "probeable": probe_write,
         "reversible": undo_write, "irreversible": plain_write}
# Where the fault strikes: before the act's effect (a refusal that stays), after it (a
# timeout once the effect happened), or on the step after it (the effect stands).
FAULTS = {"before": ("act", "permission"), "after": ("act", "timeout_after_write"),
          "later": ("finish", "permission")}
PRESSES = [("retry", ""), ("skip", ""), ("terminate", ""), ("confirm_executed", ""),
           ("confirm_not_executed", ""), ("rollback", "hold"), ("rollback", "terminate"),
           ("rollback", "resume"), ("rollback_terminate", "")]
CASES = list(itertools.product(TOOLS, FAULTS, PRESSES))
RESULTS: Counter[str] = Counter()


def _agent(kind: str) -> str:
    name = f"prop-{kind}"
    spec = TOOLS[kind]
    script = {"prep": [call("read_stock", item="p"), say("read")],
              "act": [call(spec.name, item="x"), say("acted")],
              "finish": [call("read_stock", item="final"), say("finished")]}
    tools = list({t.name: t for t in (read_stock, spec)}.values())
    registry.register(Agent(name=name, version="1", system_prompt="prop", tools=tools, plan=[StepSpec(k) for k in ("prep", "act", "finish")],
        model=lambda: ScriptedModel(script)))
    return name


def _start(kind: str, fault: str) -> Run:
    step, how = FAULTS[fault]
    where = f"{TOOLS[kind].name}:x" if kind == "read" else TOOLS[kind].name
    faults = {where if step == "act" else "read_stock:final": how}
    run = run_start(agent=_agent(kind), goal="prop", input={"faults": faults})
    drive(run)
    run.refresh_from_db()
    return run


def _effects(run: Run) -> list[tuple[str, str]]:
    return list(WorldEffect.objects.filter(run_id=str(run.pk)).order_by("id")
                .values_list("kind", "key"))


def _params(verb: str, then: str, run: Run, lines: list[dict[str, Any]]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if verb in ("rollback", "rollback_terminate"):
        act = Event.objects.filter(run=run, type="step.started", data__step="act").first()
        params["to_seq"] = act.seq - 1
        params["ticked"] = [ln["tool_call_id"] for ln in lines
                            if ln["consequence"]["fate"] == "tick"]
    if verb == "rollback":
        params["then"] = then
    return params


def _press(verb: str, then: str, run: Run, user: Any) -> tuple[str, list[dict[str, Any]]]:
    """Press as the console does; return (outcome, the preview lines it showed)."""
    action = RUN_ACTIONS[verb]
    probe = bind(action, user=user, run=run, reason="prop")
    try:
        probe.check()
    except NotAllowed:
        return "not offered", []
    params = _params(verb, then, run, [])
    try:
        lines = action.preview(run, **params)
    except ActionNotApplicable:
        return "not applicable", []
    params = _params(verb, then, run, lines)
    rule = action.confirmation(run, **params)
    if any(ln["consequence"]["may_repeat"] for ln in lines):
        assert rule is not None, "an effect may happen twice on one click"
    if rule is not None:
        before = _effects(run)
        with pytest.raises(ConfirmationRequired):
            bind(action, user=user, run=run, reason="prop", **params).execute()
        assert _effects(run) == before, "a refused press moved the world"
    typed = {"confirm": rule.word} if rule is not None else {}
    try:
        bind(action, user=user, run=run, reason="prop", **params, **typed).execute()
    except ActionNotApplicable:
        return "refused by the service", lines
    return "pressed", lines


def _check(before: list[tuple[str, str]], after: list[tuple[str, str]],
           lines: list[dict[str, Any]], tool_name: str) -> None:
    undone = [ln for ln in lines if ln["consequence"]["undone"]]
    reversed_new = [k for k in after[len(before):] if k[0].endswith(".reversed")]
    assert len(reversed_new) == len(undone), (reversed_new, undone)
    repeatable = any(ln["consequence"]["may_repeat"] for ln in lines)
    counts = Counter(k for k in after if not k[0].endswith(".reversed"))
    for (kind, _key), n in counts.items():
        assert n <= (2 if repeatable else 1), f"{kind} happened {n} times under one key"
    reversed_keys = {k for kind, k in after if kind.endswith(".reversed")}
    for ln in lines:
        if ln["consequence"]["stands"] and ln["status"] in ("succeeded", "confirmed_executed"):
            assert ln["key"] not in reversed_keys, f"{ln['tool']} was said to stand"
    new_keys = {k for kind, k in after if kind == tool_name} - {k for _, k in before}
    allowed = sum(1 for ln in lines if ln["consequence"]["calls_tool"]
                  or ln["consequence"]["key"] == "new"
                  or "may make it again" in ln["will"])
    assert len(new_keys) <= allowed, (new_keys, lines)


@pytest.mark.parametrize(("kind", "fault", "press"), CASES,
                         ids=[f"{k}-{f}-{v}{'-' + t if t else ''}" for k, f, (v, t) in CASES])
def test_the_world_does_what_the_preview_said(engine, users, kind, fault, press):
    run = _start(kind, fault)
    verb, then = press
    if run.status not in ("blocked", "unknown"):
        RESULTS["run did not stop"] += 1
        assert run.status in ("succeeded", "completed_with_exceptions")
        assert not world.effects_duplicated()
        return
    before = _effects(run)
    outcome, lines = _press(verb, then, run, users["admin"])
    if outcome != "pressed":
        RESULTS[outcome] += 1
        assert _effects(run) == before
        return
    drive(run)
    run.refresh_from_db()
    _check(before, _effects(run), lines, TOOLS[kind].name)
    if verb == "rollback_terminate" or then == "terminate":
        assert run.status == "cancelled"
    if then == "hold":
        assert run.status == "blocked" and run.attention_reason == "rolled_back"
    RESULTS["pressed and agreed"] += 1


def test_zz_report_the_generated_cases():
    """Print how many cases were generated and how many presses agreed (run after the rest)."""
    print(f"\n{len(CASES)} generated cases: {dict(RESULTS)}")
