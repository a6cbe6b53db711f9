"""A plain write is not "reversible" (issue 41 item 1): a property over declarations.

For every declaration (effect, idempotent, probe, compensate, reversibility): a contradiction
is refused at import with words saying what to change; otherwise the effect class shown is
the one docs/sdk.md's table gives for it, and — through the engine and the run page as an
operator sees it — Roll back and terminate is offered and the rollback dialog says "undone"
exactly when the tool has a compensation; any other write "stays done".
"""
from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from agentops.agents import Agent, StepSpec, registry
from agentops.demo import world
from agentops.llm.scripted import ScriptedModel, call, say
from agentops.tools import ToolResult, tool
from ledger.models import ToolCall
from runs.models import Event
from runs.services import run_start
from tests.conftest import drive
from tests.console_factories import client_for

pytestmark = pytest.mark.django_db

DECLARATIONS = list(itertools.product(("read", "write"), (False, True), (False, True),
                                      (False, True), (None, "reversible", "manual",
                                                      "irreversible")))


def _probe(ctx, item: str) -> ToolResult | None:
    return None


def _undo(ctx, facts: dict[str, Any], item: str) -> ToolResult:
    world.effect_record(kind="w.reversed", key=ctx.original_key, run_id=ctx.run_id,
                        data={}, idempotent=True)
    return ToolResult(facts={"undone": item})


def _declare(effect: str, idempotent: bool, probe: bool, compensate: bool,
             reversibility: str | None) -> Any:
    def w(ctx, item: str) -> ToolResult:
        """Do it."""
        world.effect_record(kind="w", key=ctx.idempotency_key, run_id=ctx.run_id, data={},
                            idempotent=idempotent)
        return ToolResult(facts={"done": item})

    options: dict[str, Any] = {"effect": effect, "idempotent": idempotent}
    if probe:
        options["probe"] = _probe
    if compensate:
        options["compensate"] = _undo
    if reversibility:
        options["reversibility"] = reversibility
    return tool(w, **options)


def _docs_rows() -> dict[str, str]:
    """Return docs/sdk.md's effect-class table: declaration row -> the class it shows."""
    text = Path(__file__).resolve().parents[2].joinpath("docs", "sdk.md").read_text()
    table = text.split("| Effect class | Declared as | Shown as |", 1)[1].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[2]
    return rows


def _row(effect: str, idempotent: bool, probe: bool, compensate: bool) -> str:
    if effect == "read":
        return "read"
    if idempotent:
        return "idempotent"
    if compensate:
        return "reversible"
    return "write with a probe" if probe else "irreversible / manual"


def _shown(row: str, reversibility: str | None) -> str:
    """Return the class docs' "Shown as" cell names for a declaration in ``row``."""
    cell = _docs_rows()[row]
    if "manual" in cell and reversibility == "manual":
        return "manual"
    return re.findall(r"`(\w+)`", cell)[0]


@pytest.mark.parametrize("decl", DECLARATIONS, ids=["-".join(map(str, d)) for d in DECLARATIONS])
def test_plain_write_declarations_show_the_docs_class(decl):
    effect, idempotent, probe, compensate, reversibility = decl
    if effect == "read" and compensate:
        with pytest.raises(ValueError, match="only a write tool can have compensate="):
            _declare(*decl)
        return
    if effect == "write" and reversibility == "reversible" and not compensate:
        with pytest.raises(ValueError, match="reversibility='reversible' needs compensate="):
            _declare(*decl)
        return
    if compensate and reversibility in ("manual", "irreversible"):
        with pytest.raises(ValueError, match="compensate= undoes it"):
            _declare(*decl)
        return
    spec = _declare(*decl)
    assert spec.effect_class == _shown(_row(effect, idempotent, probe, compensate),
                                       reversibility), decl
    if effect == "write":
        assert (spec.reversibility == "reversible") is compensate


WRITES = [d for d in DECLARATIONS if d[0] == "write"
          and not (d[4] == "reversible" and not d[3])
          and not (d[3] and d[4] in ("manual", "irreversible"))]


@pytest.mark.parametrize("decl", WRITES, ids=["-".join(map(str, d[1:])) for d in WRITES])
def test_plain_write_is_never_offered_as_undoable(engine, users, decl):
    """Through the engine and the run page: undo is offered exactly when something undoes."""
    compensate = decl[3]
    spec = _declare(*decl)
    name = "plain-" + "-".join(map(str, decl[1:]))
    script = {"act": [call("w", item="x"), say("done")],
              "check": [call("w2", item="y"), say("checked")]}

    @tool(effect="read")
    def w2(ctx, item: str) -> ToolResult:
        """Check it."""
        world.fault_before(ctx, "w2")
        return ToolResult(facts={"ok": item})

    registry.register(Agent(name=name, version="1", system_prompt="p", tools=[spec, w2],
                            plan=[StepSpec("act"), StepSpec("check")],
                            model=lambda: ScriptedModel(script)))
    run = run_start(agent=name, goal="g", input={"faults": {"w2": "permission"}})
    assert drive(run) == "blocked"
    client = client_for(users["operator"])
    page = client.get(reverse("console:run", args=[run.pk])).content.decode()
    assert ('data-verb="rollback_terminate"' in page) is compensate
    act = Event.objects.filter(run=run, type="step.started", data__step="act").first().seq
    dialog = client.get(reverse("console:run_action", args=[run.pk, "rollback"]),
                        {"to_seq": act - 1}).content.decode()
    call_id = ToolCall.objects.get(run=run, tool="w").tool_call_id
    row = re.search(rf'<tr data-call="{call_id}">(.*?)</tr>', dialog, re.S).group(1)
    assert ("undone by its compensation" in row) is compensate
    assert ("this write stays done" in row) is not compensate
    terminate = client.get(reverse("console:run_action", args=[run.pk, "terminate"])).content
    assert ("stays done (Roll back can undo it)" in terminate.decode()) is compensate
    assert ("this stays done whatever you press" in terminate.decode()) is not compensate
