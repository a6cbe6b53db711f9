"""A run obeys its own team's tool limits, budget policy and breaker, never another team's."""
import pytest

from agentops.llm.scripted import call, say
from ledger.errors import ToolTransient
from ledger.models import ToolCall, ToolLimit
from runs.models import BudgetPolicy, Team
from runs.services import run_start
from tests.conftest import drive
from tests.factories import make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def teams(db):
    """Two teams, A and B."""
    return (Team.objects.create(slug="team-a", name="A"),
            Team.objects.create(slug="team-b", name="B"))


def _busy(tool, team):
    """A call of ``tool`` running for another run of ``team``."""
    other = make_run(team=team)
    return ToolCall.objects.create(tool_call_id=f"tc_{team.slug}", run=other, step_key="s",
                                   turn=1, tool=tool, args_hash="x",
                                   idempotency_key=f"k-{team.slug}", status="running")


def test_a_run_waits_on_its_teams_concurrency_limit_not_another_teams(engine, teams):
    a, b = teams
    ToolLimit.objects.create(team=a, tool="lookup", concurrency=1)
    _busy("lookup", a)
    _busy("lookup", b)
    engine.make_agent("lim", {"s": [call("lookup", item="x"), say("ok")]}, plan=["s"])
    run_b = run_start(agent="lim", goal="g", team=b)
    assert drive(run_b) == "succeeded"  # team A's limit of 1 is not B's; B sets none
    run_a = run_start(agent="lim", goal="g", team=a)
    assert drive(run_a) == "waiting"  # A's own call already holds A's one slot
    assert "concurrency/rate limit" in run_a.wait_data["reason"]


def test_a_teams_concurrency_counts_only_that_teams_calls(engine, teams):
    a, b = teams
    ToolLimit.objects.create(team=a, tool="lookup", concurrency=1)
    _busy("lookup", b)  # B's call is not one of A's
    engine.make_agent("lim", {"s": [call("lookup", item="x"), say("ok")]}, plan=["s"])
    assert drive(run_start(agent="lim", goal="g", team=a)) == "succeeded"


def test_a_run_starts_with_its_teams_budget_policy(engine, teams):
    a, b = teams
    BudgetPolicy.objects.create(team=a, agent_name="", max_tool_calls=2)
    BudgetPolicy.objects.create(team=b, agent_name="caller", max_tool_calls=5)
    script = {"s": [call("lookup", item=str(i)) for i in range(20)] + [say("ok")]}
    engine.make_agent("caller", script, plan=["s"])
    run_a = run_start(agent="caller", goal="g", team=a)
    run_b = run_start(agent="caller", goal="g", team=b)
    assert (run_a.budget_tool_calls, run_b.budget_tool_calls) == (2, 5)
    assert drive(run_a) == "blocked" and "tool_calls: used 2 of 2" in run_a.attention_detail
    assert drive(run_b) == "blocked" and "tool_calls: used 5 of 5" in run_b.attention_detail
    other = run_start(agent="caller", goal="g")  # the default team has no policy
    assert other.budget_tool_calls is None


def test_a_breaker_opened_by_one_teams_failures_stays_closed_for_another(engine, teams):
    a, b = teams
    ToolLimit.objects.create(team=a, tool="lookup", breaker_threshold=3, breaker_cooldown_s=600)
    ToolLimit.objects.create(team=b, tool="lookup", breaker_threshold=3, breaker_cooldown_s=600)
    engine.world.fail_next["lookup"] = [ToolTransient("503")] * 3
    engine.make_agent("breaker", {"s": [call("lookup", item="x"), say("ok")]}, plan=["s"])
    assert drive(run_start(agent="breaker", goal="g", team=a)) == "blocked"
    assert ToolLimit.objects.get(team=a, tool="lookup").breaker_opened_at is not None
    assert ToolLimit.objects.get(team=b, tool="lookup").breaker_failures == 0
    again_a = run_start(agent="breaker", goal="g", team=a)
    assert drive(again_a) == "blocked" and again_a.attention_reason == "circuit_open"
    assert drive(run_start(agent="breaker", goal="g", team=b)) == "succeeded"
