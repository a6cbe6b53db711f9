"""Every generated cell (failure meaning x effect x writes standing x progress x role x probe):
the recommendation is pressable by someone present, changes the run's outcome, never drops a
standing write silently, and a probe that contradicts the call never ends it as succeeded.

``check_invariants`` (test_invariants.py) holds the first invariants; this adds the writes
that stand before the failure (a reversible refund, an irreversible email, both) and the
probe's answer (none / found something different) as dimensions, and the checks they need.
"""
from __future__ import annotations

import itertools

import pytest

from approvals.actions import ACTIONS
from approvals.consequences import Traits, consequence
from approvals.recommend import Evidence, FailureClass, Situation, decide
from approvals.recommend.advice import can_press
from approvals.roles import ALL_ROLES
from runs.statuses import RunStatus
from tests.triage.test_invariants import (  # noqa: F401 - the module fixture deploys v2
    EFFECTS,
    PROGRESS,
    USERS,
    _deployed_v2,
    _run,
    check_invariants,
)

F = FailureClass
# What stands before the failure: (reversible writes a rollback undoes, irreversible tools)
STANDING = {"nothing": (0, ()), "a refund": (1, ()), "an email": (0, ("email",)),
            "a refund and an email": (1, ("email",))}
PROBES = {"no probe": Evidence(),
          "probe found another amount": Evidence(probe="different",
                                                 differs=(("amount", "120", "210"),))}
# The run stops short of its goal (a restart ends it and starts a new one that repeats it).
ENDS = ("terminate", "rollback_terminate", "finish_partial", "restart")
# Actions whose preview lists every write that happened, with what becomes of it.
PREVIEW_NAMES_DONE_WRITES = ("terminate", "rollback", "rollback_terminate", "restart")


def cells() -> list[tuple[Situation, str]]:
    """Return every (situation, role) cell."""
    out = []
    for failure, effect, standing, (done, total), probe in itertools.product(
            [f for f in FailureClass if f != F.TIMER_WAIT], EFFECTS, STANDING, PROGRESS,
            PROBES):
        if probe != "no probe" and (failure != F.AMBIGUOUS_WRITE or effect in ("", "read")):
            continue  # only an unknown write has a probe answer to contradict it
        compensable, irreversible = STANDING[standing]
        status = RunStatus.UNKNOWN if failure == F.AMBIGUOUS_WRITE else RunStatus.BLOCKED
        sit = Situation(failure=failure, status=status, tool="t" if effect else "",
                        effect=effect, done=done, total=total, compensable_done=compensable,
                        standing_writes=irreversible, evidence=PROBES[probe],
                        deployed_version="2")
        out += [(sit, role) for role in ALL_ROLES]
    return out


CELLS = cells()


def _stands_unsaid(sit: Situation, verb: str, why: str) -> list[str]:
    """Return the standing writes ``verb`` leaves that neither the why nor the preview names."""
    standing = [Traits("refund", write=True, keyed=True, compensable=True)] * min(
        sit.compensable_done, 1) + [Traits(t, write=True) for t in sit.standing_writes]
    unsaid = []
    for traits in standing:
        what = consequence(verb, "done", traits)
        if not what.stands:
            continue  # the action undoes it
        if traits.tool in why or "reversible write" in why and traits.compensable:
            continue
        if verb in PREVIEW_NAMES_DONE_WRITES and "stays" in what.will:
            continue
        unsaid.append(traits.tool)
    return unsaid


def test_there_are_cells_for_every_dimension():
    assert len(CELLS) >= 2000
    assert {s.failure for s, _ in CELLS} == set(FailureClass) - {F.TIMER_WAIT}


@pytest.mark.parametrize("failure", [f for f in FailureClass if f != F.TIMER_WAIT])
def test_every_cell_holds(failure):
    for sit, role in (c for c in CELLS if c[0].failure == failure):
        check_invariants(sit, role)
        rec = decide(sit)
        run = _run(sit, rec)
        # Pressable by someone present: a role whose check() passes exists.
        presser = [r for r, u in USERS.items() if can_press(rec.action, run, u)]
        assert presser, (sit, rec)
        # Changes the outcome: the action applies to the run's status now and moves it on.
        assert run.status in ACTIONS[rec.action].statuses, (sit, rec)
        assert rec.action not in ("resume", "wake"), (sit, rec)
        if rec.action in ENDS:
            assert not _stands_unsaid(sit, rec.action, rec.why), (sit, rec)
        if sit.evidence.probe == "different":
            # A person confirms what stands; the engine never records it as succeeded alone.
            assert run.status == RunStatus.UNKNOWN
            assert "asked 120, found 210" in rec.why, rec
            assert rec.action in ("confirm_executed", "terminate"), rec


@pytest.mark.django_db
@pytest.mark.parametrize("name,verb,tool,words", [
    ("business_rejection_of_a_label_after_an_email_went_out", "terminate", "email",
     "this stays done whatever you press"),
    ("not_found_on_a_read_after_a_refund_stands", "rollback_terminate", "refund",
     "undone by its compensation"),
])
def test_the_preview_names_what_stands(engine, name, verb, tool, words):
    """PREVIEW_NAMES_DONE_WRITES holds on a real run: the recommended ending action's preview
    lists the write that stands before the failure, and what becomes of it."""
    from tests.triage import scenarios_cells  # noqa: F401 - register them
    from tests.triage.scenarios import SCENARIOS
    from tests.triage.world import world

    world.reset()
    run = SCENARIOS[name][0]()
    run.refresh_from_db()
    assert run.recommended_action == verb
    lines = [line for line in ACTIONS[verb].preview(run) if line["tool"] == tool]
    assert lines and words in lines[0]["will"], ACTIONS[verb].preview(run)
    world.reset()
