"""Invariants of the recommendation over every (failure class x effect x progress x role) cell.

For each cell the recommended action must be: pressable by the viewer (else the panel says who
can), applicable to the run's status (its action's check() passes for someone), an action
that changes the outcome (applying it and failing the same way again gives a different
recommendation), and never a clean success that drops a required write.
"""
from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from django.contrib.auth.models import User
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentops.agents import Agent, registry
from agentops.llm.scripted import ScriptedModel
from approvals.actions import ACTIONS
from approvals.recommend import TABLE, Evidence, FailureClass, Situation, decide
from approvals.recommend.advice import advice_for, can_press
from approvals.roles import ALL_ROLES
from runs.engine.core.policy import POLICY
from runs.models import Run
from runs.statuses import BlockReason, RunStatus

F = FailureClass
EFFECTS = ("", "read", "idempotent", "reversible", "manual", "irreversible")
PROGRESS = ((0, 5), (2, 5), (4, 5))  # little, some, most done
# The block reason a run of each class carries (the engine's category for it).
_CATEGORY = {F.INVALID_OUTPUT: "invalid_output", F.LOOP: "loop", F.STALL: "stall",
             F.PERMISSION: "permission", F.NOT_FOUND: "not_found",
             F.BUSINESS_REJECTION: "business_rejection", F.PERMANENT: "permanent",
             F.RATE_LIMIT: "rate_limited", F.OUTAGE: "server_error",
             F.VERSION_GONE: "version_mismatch", F.BUDGET: "budget",
             F.RECOVERY_LIMIT: "recovery_limit", F.APPROVAL_EXPIRED: "approval_expired",
             F.AMBIGUOUS_WRITE: "ambiguous_write", F.DRIFT: "drift",
             F.CONTEXT_OVERFLOW: "context_overflow", F.MODEL_REFUSED: "invalid_request",
             F.MODEL_AUTH: "auth_error", F.SELF_CHECK: "self_check_failed",
             F.CONFIG_ERROR: "config_error", F.INTERNAL_ERROR: "internal_error",
             F.WORLD_CHANGED: "world_changed"}
AGENT = "triage-prop"


@pytest.fixture(scope="module", autouse=True)
def _deployed_v2():
    """The property agent: only v2 is deployed (runs of version_gone are pinned to v1)."""
    registry.register(Agent(name=AGENT, version="2", system_prompt="p", tools=[], plan=None,
                            model=lambda: ScriptedModel({})))
    yield
    registry._agents.pop((AGENT, "2"), None)


def _user(role: str) -> User:
    user = User(username=role, is_active=True)
    user._agentops_roles = frozenset({role})
    return user


USERS = {role: _user(role) for role in ALL_ROLES}


def _status(sit: Situation) -> str:
    return {F.AMBIGUOUS_WRITE: RunStatus.UNKNOWN, F.TIMER_WAIT: RunStatus.WAITING}.get(
        sit.failure, RunStatus.BLOCKED)


def _run(sit: Situation, rec) -> Run:
    gone = sit.failure == F.VERSION_GONE
    reason = "" if sit.failure in (F.AMBIGUOUS_WRITE, F.TIMER_WAIT) else \
        POLICY[_CATEGORY[sit.failure]].block_reason if sit.failure in _CATEGORY else \
        BlockReason.PERMANENT_ERROR
    return Run(agent_name=AGENT if not gone or sit.deployed_version else "triage-none",
               agent_version="1" if gone else "2", status=_status(sit),
               attention_reason=reason, wait_kind="timer" if sit.failure == F.TIMER_WAIT else "",
               recommended_action=rec.action, recommended_alternatives=list(rec.alternatives),
               recommendation_why=rec.why, team_id=0)  # in memory: no team row needed


def check_invariants(sit: Situation, role: str) -> None:
    """Assert every invariant for ``sit`` seen by ``role``."""
    rec = decide(sit)
    assert rec.why and rec.action not in rec.alternatives
    assert rec.action == "wait" or rec.action in ACTIONS, rec
    assert set(rec.alternatives) <= set(ACTIONS)
    run = _run(sit, rec)
    # Applicable to the run's status: some role can press it now.
    if rec.action != "wait":
        assert any(can_press(rec.action, run, u) for u in USERS.values()), (sit, rec)
    advice = advice_for(run=run, user=USERS[role])
    if advice.button:
        assert advice.button == rec.action and can_press(rec.action, run, USERS[role])
    elif rec.action != "wait":
        assert advice.who_can and advice.headline.startswith("Ask "), (role, rec)
    # Changes the outcome: the same block again never gets the same re-running answer.
    assert rec.action not in ("resume", "wake")
    if rec.action == "retry":
        assert sit.failure != F.VERSION_GONE
        again = decide(replace(sit, operator_retries=sit.operator_retries + 1))
        assert again.action != "retry", (sit, again)
    if rec.action == "confirm_not_executed":
        ev = replace(sit.evidence, reconfirmed=sit.evidence.reconfirmed + 1)
        assert decide(replace(sit, evidence=ev)).action != "confirm_not_executed"
    # Never a clean success without a required write.
    if rec.action == "skip":
        assert not sit.is_write and not sit.step_writes_done and not sit.writes_ahead, sit
    if sit.is_write and sit.failure not in (F.AMBIGUOUS_WRITE,):
        assert "skip" not in rec.alternatives, (sit, rec)


def _situation(failure: FailureClass, effect: str, done: int, total: int, **kw) -> Situation:
    tool = "t" if effect else ""
    return Situation(failure=failure, status=RunStatus.BLOCKED, tool=tool, effect=effect,
                     done=done, total=total, **kw)


def test_the_table_covers_every_class_and_every_engine_category():
    assert set(TABLE) == set(FailureClass)
    assert set(_CATEGORY.values()) <= set(POLICY) | {"ambiguous_write"}


@pytest.mark.parametrize("failure", [f for f in FailureClass])
def test_every_cell(failure):
    """Exhaustive: each effect x progress x role x (first time / retried) x deployed."""
    for effect, (done, total), role, retried, deployed in itertools.product(
            EFFECTS, PROGRESS, ALL_ROLES, (0, 1), ("", "2")):
        sit = _situation(failure, effect, done, total, operator_retries=retried,
                         deployed_version=deployed)
        check_invariants(sit, role)


situations = st.builds(
    _situation,
    failure=st.sampled_from(list(FailureClass)),
    effect=st.sampled_from(EFFECTS),
    done=st.integers(0, 7), total=st.integers(1, 8),
    compensable_done=st.integers(0, 2),
    step_writes_done=st.sampled_from(((), ("refund",))),
    writes_ahead=st.sampled_from(((), ("close: refund (idempotent)",))),
    operator_retries=st.integers(0, 2),
    deployed_version=st.sampled_from(("", "2")),
    evidence=st.builds(Evidence, probe=st.sampled_from(("none", "unreachable",
                                                        "not_found_early")),
                       cause=st.sampled_from(("timeout", "transient", "worker_lost", "")),
                       elapsed_ms=st.one_of(st.none(), st.integers(0, 120_000)),
                       timeout_s=st.one_of(st.none(), st.floats(0.1, 60)),
                       executed_before=st.integers(0, 5), not_executed_before=st.integers(0, 5),
                       reconfirmed=st.integers(0, 1)),
).filter(lambda s: s.done < s.total)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sit=situations, role=st.sampled_from(ALL_ROLES))
def test_invariants_hold_for_any_situation(sit, role):
    check_invariants(sit, role)


def test_a_viewer_without_the_button_is_told_who_can():
    rec = decide(_situation(F.BUDGET, "read", 4, 5))
    run = _run(_situation(F.BUDGET, "read", 4, 5), rec)
    advice = advice_for(run=run, user=USERS["operators"])
    assert rec.action == "raise_budget" and not advice.button
    assert advice.headline == "Ask an admin to press Raise budget"
    assert advice_for(run=run, user=USERS["admins"]).button == "raise_budget"
