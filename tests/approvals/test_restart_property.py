"""The restart preview's promise, through the engine: what it says a restart repeats is what
happens again in the world, and nothing else.

Generated over effect class × fault point × input (the original one, which fails the same way
again, or a corrected one without the fault) × what was done first (nothing, or a rollback
that undid the act): a run over the demo world (the tools of test_consequence_property record
each effect with its key) stops where the fault puts it; Restart from input is pressed through
the bound action the console holds, with the typed word; the new run is driven by the engine;
and the world's effects of both runs are compared with the preview's lines:

- every effect the old run left standing that the new run made again is on a line that says
  it may happen a second time (``may_repeat``), and every such line whose effect stood was made
  again by a new run that got that far (a new key: the world cannot tell it is the same);
- an effect a rollback undid is on a line that says it may be made anew, never "a second time";
- each line saying the new run calls the tool again is a call of that tool in the new run.
"""
from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import pytest

from approvals.actions import RUN_ACTIONS
from approvals.actions.base import bind
from approvals.errors import ConfirmationRequired
from ledger.models import ToolCall
from runs.models import Event, Run
from tests.approvals.test_consequence_property import FAULTS, TOOLS, _effects, _start
from tests.conftest import drive

pytestmark = pytest.mark.django_db
INPUTS = ("original", "corrected")
FIRST = ("nothing", "rollback")
CASES = [c for c in itertools.product(TOOLS, FAULTS, INPUTS, FIRST)
         if c[3] == "nothing" or c[1] == "later"]  # a rollback needs the act done before
RESULTS: Counter[str] = Counter()


def _standing(effects: list[tuple[str, str]]) -> set[str]:
    """Return the effect kinds that happened and were not reversed."""
    undone = {key for kind, key in effects if kind.endswith(".reversed")}
    return {kind for kind, key in effects if not kind.endswith(".reversed") and key not in undone}


def _roll_back(run: Run, user: Any) -> None:
    act = Event.objects.filter(run=run, type="step.started", data__step="act").first()
    action = RUN_ACTIONS["rollback"]
    lines = action.preview(run, to_seq=act.seq - 1)
    ticked = [ln["tool_call_id"] for ln in lines if ln["consequence"]["fate"] == "tick"]
    bind(action, user=user, run=run, reason="undo first", to_seq=act.seq - 1, ticked=ticked,
         then="hold", confirm="rollback").execute()
    run.refresh_from_db()


def _restart(run: Run, user: Any, given: str) -> tuple[Run, list[dict[str, Any]]]:
    action = RUN_ACTIONS["restart"]
    params = {"input": {"faults": {}}} if given == "corrected" else {}
    lines = action.preview(run, **params)
    with pytest.raises(ConfirmationRequired):
        bind(action, user=user, run=run, reason="prop", **params).execute()
    assert not Run.objects.filter(restarted_from=run).exists(), "a refused press started a run"
    bind(action, user=user, run=run, reason="prop", confirm="restart", **params).execute()
    return Run.objects.get(restarted_from=run), lines


def _check(old: Run, new: Run, before: list[tuple[str, str]],
           lines: list[dict[str, Any]]) -> None:
    stood = _standing(before)
    made_again = _standing(_effects(new))
    promised = {ln["tool"] for ln in lines if ln["consequence"]["may_repeat"]}
    assert stood & made_again <= promised, (stood & made_again, lines)
    reached = {c.tool for c in ToolCall.objects.filter(run=new)}
    for tool in promised & stood:
        if tool in reached:
            assert tool in made_again, f"{tool} was said to happen again and did not"
    for ln in lines:
        if ln["status"] == "compensated":
            assert not ln["consequence"]["may_repeat"] and ln["consequence"]["key"] == "new"
        if ln["consequence"]["calls_tool"] and new.status == "succeeded":
            assert ln["tool"] in reached, f"{ln['tool']} was said to be called again"
    old.refresh_from_db()
    assert old.status == "cancelled"
    reason = Event.objects.get(run=old, type="run.cancelled").data["reason"]
    assert reason.startswith(f"restarted as {new.pk}")


@pytest.mark.parametrize(("kind", "fault", "given", "first"), CASES,
                         ids=["-".join(c) for c in CASES])
def test_a_restart_repeats_what_its_preview_said(engine, users, kind, fault, given, first):
    run = _start(kind, fault)
    if run.status not in ("blocked", "unknown"):
        RESULTS["run did not stop"] += 1
        return
    if first == "rollback":
        _roll_back(run, users["admin"])
    before = _effects(run)
    new, lines = _restart(run, users["admin"], given)
    drive(new)
    new.refresh_from_db()
    if given == "corrected":
        assert new.status == "succeeded", new.attention_detail
    _check(run, new, before, lines)
    RESULTS[f"restarted ({new.status}) and agreed"] += 1


def test_zz_report_the_generated_cases():
    """Print how many cases were generated and how they ended (run after the rest)."""
    print(f"\n{len(CASES)} generated restart cases: {dict(RESULTS)}")
