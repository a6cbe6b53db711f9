"""Roles per team (approvals/roles.py, approvals/users.py) and the team a new run belongs to."""
from __future__ import annotations

import pytest

from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, say
from approvals.models import Intervention
from approvals.roles import (
    ADMIN, OPERATOR, SUPPORT, VIEWER, can_admin, can_operate, can_view, is_installation_admin,
    team_ids_for, user_roles,
)
from approvals.users import membership_set, memberships_replace
from runs.models import Run, Team
from runs.models.team import DEFAULT_TEAM_SLUG
from runs.services import run_start
from tests.console_factories import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def teams():
    """Two teams besides the default one."""
    return (Team.objects.create(slug="payments", name="Payments"),
            Team.objects.create(slug="support-desk", name="Support desk"))


def test_a_person_is_operator_in_one_team_and_viewer_in_another(teams):
    pay, desk = teams
    ana = make_user("ana")
    membership_set(user=ana, team=pay, role=OPERATOR, actor="admin")
    membership_set(user=ana, team=desk, role=VIEWER, actor="admin")
    assert can_operate(ana, pay) and not can_operate(ana, desk)
    assert can_view(ana, desk) and not can_view(ana, Team.objects.get(slug=DEFAULT_TEAM_SLUG))
    assert user_roles(ana) == {OPERATOR, VIEWER}
    assert team_ids_for(ana) == {pay.pk, desk.pk}
    assert team_ids_for(ana, OPERATOR) == {pay.pk}
    assert team_ids_for(ana, SUPPORT) == frozenset()
    assert not can_admin(ana) and not is_installation_admin(ana)


def test_installation_wide_roles_hold_in_every_team(teams):
    op, admin = make_user("op", OPERATOR), make_user("root", ADMIN)
    assert all(can_operate(op, t) for t in teams)
    assert team_ids_for(op, OPERATOR) is None and team_ids_for(op, ADMIN) == frozenset()
    assert team_ids_for(admin, SUPPORT) is None and is_installation_admin(admin)


def test_a_team_admin_is_no_installation_admin(teams):
    pay, desk = teams
    bo = make_user("bo")
    membership_set(user=bo, team=pay, role=ADMIN)
    assert can_admin(bo, pay) and can_operate(bo, pay) and not can_view(bo, desk)
    assert can_admin(bo) and not is_installation_admin(bo)


def test_replacing_memberships_sets_exactly_those_and_audits_each_change(teams):
    pay, desk = teams
    cy = make_user("cy")
    membership_set(user=cy, team=pay, role=OPERATOR, actor="admin")
    memberships_replace(user=cy, roles={desk: SUPPORT}, actor="sso", reason="claim groups")
    assert team_ids_for(cy) == {desk.pk}
    rows = list(Intervention.objects.filter(action="team.membership").order_by("id")
                .values_list("data", flat=True))
    assert rows == [
        {"user": "cy", "team": "payments", "from": None, "to": OPERATOR},
        {"user": "cy", "team": "payments", "from": OPERATOR, "to": None},
        {"user": "cy", "team": "support-desk", "from": None, "to": SUPPORT},
    ]
    memberships_replace(user=cy, roles={desk: SUPPORT})  # no change: no audit row
    assert Intervention.objects.filter(action="team.membership").count() == 3


def test_a_bad_role_is_refused_naming_the_roles(teams):
    with pytest.raises(Exception, match="role must be one of viewers, operators"):
        membership_set(user=make_user("dee"), team=teams[0], role="owner")


def test_runs_land_in_their_team_and_children_and_restarts_stay_in_it(engine, teams):
    pay, _ = teams
    registry.register(Agent(name="talker", version="1", system_prompt="t", tools=[],
                            plan=[StepSpec("main")], model=lambda: ScriptedModel({"main": [say("done")]})))
    plain = run_start(agent="talker", goal="no team given")
    assert plain.team.slug == DEFAULT_TEAM_SLUG
    parent = run_start(agent="talker", goal="refund 42", team=pay)
    child = run_start(agent="talker", goal="a part", parent=parent, team=None)
    again = run_start(agent="talker", goal="refund 42", restarted_from=parent)
    assert {r.team_id for r in Run.objects.filter(pk__in=[parent.pk, child.pk, again.pk])} \
        == {pay.pk}
