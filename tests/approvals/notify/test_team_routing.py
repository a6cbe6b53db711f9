"""A notification rule routes only its own team's runs and approvals."""
from __future__ import annotations

import pytest

from agentops.llm.scripted import call, say
from approvals.models import Delivery, NotifyRule, NotifyTrack
from approvals.notify.sender import deliveries_send
from ledger.errors import ToolPermissionDenied
from runs.models import Team
from runs.services import run_start
from tests.approvals.conftest import agent
from tests.approvals.notify.conftest import group_with
from tests.conftest import drive

pytestmark = pytest.mark.django_db


@pytest.fixture
def teams(db):
    """Two teams, A and B."""
    return (Team.objects.create(slug="team-a", name="A"),
            Team.objects.create(slug="team-b", name="B"))


def test_an_approval_is_routed_by_its_own_teams_rule_only(engine, channels, teams):
    a, b = teams
    _, receiver = channels
    rule_a = NotifyRule.objects.create(team=a, name="a-pay", subject="approval",
                                       group=group_with("a-payers"), channel="hook")
    rule_b = NotifyRule.objects.create(team=b, name="b-pay", subject="approval",
                                       group=group_with("b-payers"), channel="hook")
    agent("apr", {"s": [call("pay", to="bob", amount=5), say("done")]}, ["s"])
    run = run_start(agent="apr", goal="g", team=a)
    assert drive(run) == "waiting" and run.wait_kind == "approval"
    approval = run.approvals.get()
    assert approval.assigned_group.name == "a-payers"
    assert set(NotifyTrack.objects.values_list("rule_id", flat=True)) == {rule_a.pk}
    assert not Delivery.objects.filter(track__rule=rule_b).exists()
    deliveries_send()
    assert len(receiver.requests) == Delivery.objects.count() == 1


def test_a_stuck_run_never_fires_another_teams_rule(engine, channels, teams):
    a, b = teams
    NotifyRule.objects.create(team=b, name="b-stuck", subject="stuck", channel="hook")
    engine.world.fail_next["lookup"] = [ToolPermissionDenied("no access to region eu")]
    agent("blk", {"s": [call("lookup", item="eu"), say("checked")]}, ["s"])
    run_a = run_start(agent="blk", goal="g", team=a)
    assert drive(run_a) == "blocked"
    assert not NotifyTrack.objects.exists() and not Delivery.objects.exists()
    engine.world.fail_next["lookup"] = [ToolPermissionDenied("no access to region eu")]
    run_b = run_start(agent="blk", goal="g", team=b)
    assert drive(run_b) == "blocked"
    assert list(Delivery.objects.values_list("run_id", flat=True)) == [run_b.pk]
