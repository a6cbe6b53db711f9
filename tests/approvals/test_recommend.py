"""The recommendation for each row of the policy table, and how it changes with progress."""
from __future__ import annotations

import pytest

from approvals.recommend import recommendation
from runs.engine.policy import POLICY
from tests.approvals.conftest import agent, blocked_run

# category -> recommended action at mid progress (40% done), with no side effects made.
EXPECTED = {
    "rate_limited": "retry", "timeout": "retry", "server_error": "retry", "transient": "retry",
    "invalid_output": "retry", "context_overflow": "skip", "permanent": "skip",
    "permission": "skip", "invalid_request": "terminate", "auth_error": "retry",
    "tool_error": "skip", "ambiguous_write": "confirm", "loop": "skip", "stall": "skip",
    "turn_limit": "skip",
    "budget": "raise_budget", "recovery_limit": "retry", "circuit_open": "retry",
    "version_mismatch": "terminate", "drift": "terminate", "approval_expired": "retry",
    "self_check_failed": "terminate", "incomplete_step": "retry",
}
# At 80% done a restart wastes most of the work: these resume instead of terminating.
AT_MOST_DONE = {c: "retry" for c in ("invalid_request", "version_mismatch", "drift",
                                      "self_check_failed")}
# At 0% done a loop or stall is cheaper to restart than to skip past.
AT_NOTHING_DONE = {"loop": "terminate", "stall": "terminate"}


def state_at(done: int, total: int = 5) -> dict:
    steps = {f"s{i}": {"status": "succeeded" if i < done else "pending"} for i in range(total)}
    return {"steps": steps, "turns": [], "run": {}}


def test_the_table_is_covered():
    assert set(EXPECTED) == set(POLICY)


@pytest.mark.parametrize("category", sorted(POLICY))
def test_each_policy_row_mid_progress(category):
    r = recommendation(category=category, state=state_at(2))
    assert r.action == EXPECTED[category]
    assert r.why.startswith(POLICY[category].why)
    assert r.action not in r.alternatives
    assert set(POLICY[category].alternatives) <= set(r.alternatives)


@pytest.mark.parametrize("category", sorted(POLICY))
def test_each_policy_row_when_most_is_done(category):
    r = recommendation(category=category, state=state_at(4))
    assert r.action == AT_MOST_DONE.get(category, EXPECTED[category])
    if category in AT_MOST_DONE:
        assert "terminate" in r.alternatives and "80%" in r.why


@pytest.mark.parametrize("category", sorted(POLICY))
def test_each_policy_row_when_nothing_is_done(category):
    r = recommendation(category=category, state=state_at(0))
    assert r.action == AT_NOTHING_DONE.get(category, EXPECTED[category])
    if category in AT_NOTHING_DONE:
        assert r.alternatives[0] == "skip" and "0%" in r.why


def test_confirm_offers_both_confirmations():
    r = recommendation(category="ambiguous_write", state=state_at(1))
    assert r.alternatives[:2] == ("confirm_executed", "confirm_not_executed")


@pytest.mark.django_db
def test_reversible_writes_make_rollback_the_first_alternative(engine):
    run = blocked_run("risk")  # step prep reserved stock (reversible, compensable)
    from runs.engine.snapshots import load_state

    state = load_state(run.pk)
    r = recommendation(category="permanent", state=state)
    assert r.action == "skip" and r.alternatives[0] == "rollback"
    assert recommendation(category="permanent", state=state_at(1)).alternatives[0] != "rollback"
    state["steps"]["prep"]["status"] = "pending"  # nothing done: terminating is recommended
    r = recommendation(category="drift", state=state)
    assert r.action == "terminate" and r.alternatives[0] == "rollback" and "roll back" in r.why


@pytest.mark.django_db
def test_retry_of_an_irreversible_call_says_so(engine):
    agent("irr", {"s": []}, ["s"])
    r = recommendation(category="timeout", state={**state_at(1), "run": {"agent": "irr",
                                                                           "version": "1"}},
                       tool="email")
    assert r.action == "retry" and "email (irreversible)" in r.why



@pytest.mark.django_db
def test_attention_runs_are_grouped_by_signature_on_the_queue(engine, users):
    from django.test import Client

    first, second = blocked_run("grp"), blocked_run("grp")
    blocked_run("grp-other")
    client = Client()
    client.force_login(users["operator"])
    page = client.get("/?view=groups").content.decode()
    rows = page[page.index('class="grid groups"'):].split("<tr data-row")[1:]
    assert len(rows) == 2 and "<strong>2</strong>" in rows[0] and "<strong>1</strong>" in rows[1]
    assert first.attention_signature == second.attention_signature
    assert f"sig={first.attention_signature}" in rows[0]
