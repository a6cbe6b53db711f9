"""Budget policies, tool limits and notification rules are scoped to the teams one administers.

Through the real console views and the real API: a team admin lists, reads and writes only
their team's rows (another team's id is 404); installation admins see every team's.
"""
from __future__ import annotations

import pytest
from django.test import Client

from approvals.apikeys import apikey_create
from approvals.models import Intervention, NotifyRule
from approvals.roles import ADMIN
from approvals.users import membership_set
from ledger.models import ToolLimit
from runs.models import BudgetPolicy, ModelPrice, Team
from tests.api.conftest import ApiClient, assert_error
from tests.console_factories import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(settings):
    """Teams A and B, each with a policy, a tool limit and a rule; a team admin of A."""
    settings.AGENTOPS_NOTIFY_CHANNELS = {"hook": {"kind": "webhook", "url": "http://x.test/",
                                                  "secret": ""}}
    a, b = Team.objects.create(slug="team-a", name="A"), Team.objects.create(slug="team-b",
                                                                             name="B")
    rows = {}
    for team in (a, b):
        rows[team.slug] = {
            "policy": BudgetPolicy.objects.create(team=team, agent_name=f"agent-of-{team.slug}",
                                                  max_tokens=100),
            "limit": ToolLimit.objects.create(team=team, tool=f"tool_of_{team.slug}",
                                              concurrency=3),
            "rule": NotifyRule.objects.create(team=team, name=f"rule-of-{team.slug}",
                                              channel="hook")}
    alice = make_user("alice")
    membership_set(user=alice, team=a, role=ADMIN)
    return {"a": a, "b": b, "rows": rows, "alice": alice}


def _console(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _api(user, team=None) -> ApiClient:
    """An API client: a key of ``team`` (a key acts in its one team), else the console session."""
    if team is not None:
        return ApiClient(apikey_create(user=user, name="t", team=team)[1], user)
    client = ApiClient(None, user)
    client.force_login(user)
    return client


def test_the_settings_page_lists_only_the_team_admins_rows(world):
    html = _console(world["alice"]).get("/settings/").content.decode()
    assert "agent-of-team-a" in html and "tool_of_team-a" in html and "rule-of-team-a" in html
    assert "team-b" not in html
    root = _console(make_user("root", "admins")).get("/settings/").content.decode()
    assert "agent-of-team-b" in root and "tool_of_team-b" in root and "rule-of-team-b" in root


@pytest.mark.parametrize("kind,row", [("budget", "policy"), ("tool-limit", "limit"),
                                      ("notify-rule", "rule")])
def test_another_teams_row_is_404_in_the_console_and_unchanged(world, kind, row):
    theirs = world["rows"]["team-b"][row]
    client = _console(world["alice"])
    assert client.get(f"/settings/{kind}/{theirs.pk}/").status_code == 404
    assert client.post(f"/settings/{kind}/{theirs.pk}/", {"name": "x"}).status_code == 404
    mine = world["rows"]["team-a"][row]
    assert client.get(f"/settings/{kind}/{mine.pk}/").status_code == 200
    assert not Intervention.objects.filter(action__startswith="settings.").exists()


def test_a_team_admin_cannot_put_a_row_in_another_team(world):
    client = _console(world["alice"])
    response = client.post("/settings/tool-limit/new/", {
        "team": world["b"].pk, "tool": "lookup", "breaker_threshold": 5,
        "breaker_cooldown_s": 60})
    assert response.status_code == 422
    assert not ToolLimit.objects.filter(tool="lookup").exists()
    made = client.post("/settings/tool-limit/new/", {
        "tool": "lookup", "concurrency": 2, "breaker_threshold": 5, "breaker_cooldown_s": 60})
    assert made.status_code == 302  # one team: no selector, the row goes to it
    assert ToolLimit.objects.get(tool="lookup").team == world["a"]
    audit = Intervention.objects.get(action="settings.tool_limit")
    assert audit.data["team"] == "team-a"


def test_the_form_offers_a_team_selector_only_to_admins_of_several_teams(world):
    one = _console(world["alice"]).get("/settings/budget/new/").content.decode()
    assert '<select name="team"' not in one and 'type="hidden" name="team"' in one
    membership_set(user=world["alice"], team=world["b"], role=ADMIN)
    two = _console(world["alice"]).get("/settings/budget/new/").content.decode()
    assert '<select name="team"' in two and "team-a" in two and "team-b" in two


def test_model_prices_are_changed_by_installation_admins_only(world):
    assert _console(world["alice"]).post("/settings/price/new/", {
        "model": "m", "input_per_mtok_micros": 1, "output_per_mtok_micros": 1}
    ).status_code == 403
    assert not ModelPrice.objects.exists()


def test_the_api_lists_and_reads_only_the_team_admins_rows(world):
    api = _api(world["alice"], world["a"])
    policies = api.get("/api/admin/budget-policies").json()
    assert [(p["team"], p["agent_name"]) for p in policies] == [("team-a", "agent-of-team-a")]
    assert [lim["tool"] for lim in api.get("/api/admin/tool-limits").json()] == [
        "tool_of_team-a"]
    assert [r["name"] for r in api.get("/api/notify/rules").json()] == ["rule-of-team-a"]
    theirs = world["rows"]["team-b"]
    assert_error(api.get(f"/api/admin/budget-policies/{theirs['policy'].pk}"), 404)
    assert_error(api.patch_json(f"/api/admin/budget-policies/{theirs['policy'].pk}",
                                {"max_tokens": 1}), 404)
    assert_error(api.put_json(f"/api/notify/rules/{theirs['rule'].pk}",
                              {"name": "x", "channel": "hook"}), 404)
    assert_error(api.delete(f"/api/notify/rules/{theirs['rule'].pk}"), 404)
    assert_error(api.get("/api/admin/tool-limits/tool_of_team-b?team=team-b"), 404,
                 "team_not_found")
    assert BudgetPolicy.objects.get(pk=theirs["policy"].pk).max_tokens == 100
    assert NotifyRule.objects.filter(pk=theirs["rule"].pk).exists()


def test_the_api_writes_into_the_team_admins_team_and_refuses_another(world):
    api = _api(world["alice"], world["a"])
    assert_error(api.post_json("/api/admin/budget-policies",
                               {"agent_name": "x", "team": "team-b"}), 404, "team_not_found")
    assert_error(api.put_json("/api/admin/tool-limits/lookup?team=team-b",
                              {"concurrency": 1}), 404, "team_not_found")
    made = api.post_json("/api/admin/budget-policies", {"agent_name": "x", "max_tokens": 9})
    assert made.status_code == 201 and made.json()["team"] == "team-a"
    limit = api.put_json("/api/admin/tool-limits/lookup", {"concurrency": 1}).json()
    assert limit["team"] == "team-a"
    rule = api.post_json("/api/notify/rules", {"name": "mine", "channel": "hook"})
    assert rule.status_code == 201 and rule.json()["team"] == "team-a"


def test_an_admin_of_several_teams_must_say_which(world):
    membership_set(user=world["alice"], team=world["b"], role=ADMIN)
    api = _api(world["alice"])
    error = assert_error(api.post_json("/api/admin/budget-policies", {"agent_name": "x"}), 422)
    assert "team-a, team-b" in error["message"]
    made = api.post_json("/api/admin/budget-policies", {"agent_name": "x", "team": "team-b"})
    assert made.status_code == 201 and made.json()["team"] == "team-b"
    both = {p["team"] for p in api.get("/api/admin/budget-policies").json()}
    assert both == {"team-a", "team-b"}


def test_installation_admins_default_to_the_default_team_and_reach_every_team(world):
    api = _api(make_user("root", "admins"))
    made = api.post_json("/api/admin/budget-policies", {"agent_name": "x"})
    assert made.json()["team"] == "default"
    theirs = world["rows"]["team-b"]["policy"]
    assert api.get(f"/api/admin/budget-policies/{theirs.pk}").json()["team"] == "team-b"
    assert len(api.get("/api/admin/tool-limits").json()) == 2
