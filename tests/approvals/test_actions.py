"""Every action x role: allowed roles succeed; the others are refused with nothing changed."""
from __future__ import annotations

from typing import Any

import pytest

from approvals.actions import ACTIONS
from approvals.actions.base import bind
from approvals.errors import NotAllowed
from approvals.models import Approval, Intervention
from ledger.models import ToolCall
from runs.models import Run
from tests.approvals.conftest import approval_run, blocked_run, budget_run, unknown_run

pytestmark = pytest.mark.django_db

OPERATE = {"operator", "admin"}
MATRIX = {  # verb -> roles that may use it (as built; admins hold every role)
    "retry": OPERATE, "skip": OPERATE, "rollback": OPERATE, "terminate": OPERATE,
    "confirm_executed": OPERATE, "confirm_not_executed": OPERATE, "resume": OPERATE,
    "raise_budget": {"admin"},
    "approve": {"support", "admin"}, "reject": {"support", "admin"},
    "edit_args": {"support", "admin"},
}
ROLES = ("viewer", "operator", "support", "admin", "nobody")


def target_for(verb: str) -> tuple[Any, dict[str, Any]]:
    """Return a target in the state ``verb`` applies to, and the parameters it needs."""
    if verb in ("confirm_executed", "confirm_not_executed"):
        return unknown_run(), {}
    if verb == "resume":
        run = budget_run()
        Run.objects.filter(pk=run.pk).update(budget_tool_calls=9)
        run.refresh_from_db()
        return run, {}
    if verb == "raise_budget":
        return budget_run(), {"tool_calls": 9}
    if verb in ("approve", "reject", "edit_args"):
        run = approval_run()
        params = {"args": {"to": "bob", "amount": 1}} if verb == "edit_args" else {}
        return Approval.objects.get(run=run), params
    return blocked_run(), {}


def snapshot(target: Any) -> tuple:
    run = target.run if isinstance(target, Approval) else target
    run.refresh_from_db()
    calls = tuple(ToolCall.objects.filter(run=run).order_by("id").values_list("status", flat=True))
    approvals = tuple(Approval.objects.filter(run=run).values_list("status", flat=True))
    return run.status, run.last_seq, run.budget_tool_calls, calls, approvals


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("verb", sorted(MATRIX))
def test_action_by_role(engine, users, verb, role):
    action = ACTIONS[verb]
    target, params = target_for(verb)
    before = snapshot(target)
    if role in MATRIX[verb]:
        action.check(users[role], target)
        action.execute(users[role], target, "because", confirm=action.confirm_word, **params)
        assert snapshot(target) != before
        audit = Intervention.objects.get()
        assert (audit.action, audit.actor_name, audit.reason) == (action.name, role, "because")
    else:
        with pytest.raises(NotAllowed, match="needs the"):
            action.check(users[role], target)
        with pytest.raises(NotAllowed, match="nothing was changed"):
            action.execute(users[role], target, "because", **params)
        assert snapshot(target) == before
        assert not Intervention.objects.exists()


def test_action_names_are_dotted_and_unique():
    names = [a.name for a in ACTIONS.values()]
    assert len(set(names)) == len(names) == 17
    assert {n.split(".")[0] for n in names} == {"run", "approval"}


def test_the_console_binding_hides_an_action_that_does_not_apply(engine, users):
    run = unknown_run()
    bound = bind(ACTIONS["retry"], user=users["operator"], run=run, reason="r")
    with pytest.raises(NotAllowed, match="retry applies to runs that are blocked; this one is unknown"):
        bound.check()
    confirm = bind(ACTIONS["confirm_not_executed"], user=users["operator"], run=run, reason="r",
                   confirm="again")  # the email has no key: it may be sent twice
    confirm.check()
    assert [p["tool"] for p in confirm.preview()] == ["email"]
    confirm.execute()
    run.refresh_from_db()
    assert run.status == "queued"
