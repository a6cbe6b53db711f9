"""Teams and their members from the console page, the API and the CLI, each change audited."""
from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from approvals.apikeys import apikey_create
from approvals.models import Intervention, Membership
from approvals.roles import ADMIN, OPERATOR, can_operate, team_ids_for
from approvals.users import membership_set
from runs.models import SavedView, Team
from tests.api.conftest import ApiClient, assert_error
from tests.console_factories import make_user
from tests.factories import make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def teams(db):
    """Teams A and B; alice administers A only; bob has no role yet."""
    a, b = Team.objects.create(slug="team-a", name="A"), Team.objects.create(slug="team-b",
                                                                             name="B")
    alice = make_user("alice")
    membership_set(user=alice, team=a, role=ADMIN)
    make_user("bob")
    return a, b, alice


def _console(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_team_admin_sees_and_manages_only_their_team(teams):
    a, b, alice = teams
    client = _console(alice)
    listing = client.get("/teams/").content.decode()
    assert 'data-team="team-a"' in listing and "team-b" not in listing
    assert "New team" not in listing  # only installation admins create teams
    assert client.get("/teams/team-b/").status_code == 404
    assert client.post("/teams/team-b/", {"username": "bob", "role": OPERATOR}
                       ).status_code == 404
    response = client.post("/teams/team-a/", {"username": "bob", "role": OPERATOR,
                                              "reason": "joins payments"})
    assert response.status_code == 302
    bob = Membership.objects.get(user__username="bob")
    assert (bob.team, bob.role) == (a, OPERATOR)
    assert can_operate(bob.user, a) and not can_operate(bob.user, b)
    audit = Intervention.objects.get(action="team.membership", data__user="bob")
    assert audit.actor == alice and audit.data["to"] == OPERATOR and audit.reason == \
        "joins payments"
    page = client.get("/teams/team-a/").content.decode()
    assert 'data-member="bob"' in page and 'aria-label="Remove bob from team-a"' in page
    assert "Leave team" in page and 'aria-label="Remove alice' not in page  # her own row
    client.post("/teams/team-a/", {"username": "bob", "role": ""})
    assert not Membership.objects.filter(user__username="bob").exists()


def test_bad_member_changes_say_what_is_wrong_and_change_nothing(teams):
    _, _, alice = teams
    client = _console(alice)
    nobody = client.post("/teams/team-a/", {"username": "nosuch", "role": OPERATOR})
    assert nobody.status_code == 422 and "no user" in nobody.content.decode()
    bad = client.post("/teams/team-a/", {"username": "bob", "role": "owners"})
    assert bad.status_code == 422 and "role must be one of" in bad.content.decode()
    assert Membership.objects.filter(user__username="bob").count() == 0


def test_only_installation_admins_create_teams(teams):
    _, _, alice = teams
    refused = _console(alice).post("/teams/", {"slug": "ops", "name": "Ops"})
    assert refused.status_code == 422 and not Team.objects.filter(slug="ops").exists()
    root = _console(make_user("root", "admins"))
    assert root.post("/teams/", {"slug": "Bad Slug"}).status_code == 422
    made = root.post("/teams/", {"slug": "ops", "name": "Ops"})
    assert made.status_code == 302 and made["Location"] == "/teams/ops/"
    assert Intervention.objects.filter(action="team.create", data__team="ops").exists()
    assert root.post("/teams/", {"slug": "ops"}).status_code == 422  # exists already
    assert 'data-team="team-b"' in root.get("/teams/").content.decode()


def test_the_members_api_is_scoped_to_the_teams_one_administers(teams):
    a, _, alice = teams
    api = ApiClient(apikey_create(user=alice, name="t", team=a)[1], alice)
    put = api.put_json("/api/teams/team-a/members/bob", {"role": "support"})
    assert put.status_code == 200, put.content
    assert {m["username"]: m["role"] for m in put.json()} == {"alice": ADMIN, "bob": "support"}
    assert api.get("/api/teams/team-a/members").json() == put.json()
    assert_error(api.get("/api/teams/team-b/members"), 404, "team_not_found")
    assert_error(api.put_json("/api/teams/team-b/members/bob", {"role": "viewers"}), 404)
    assert_error(api.put_json("/api/teams/team-a/members/bob", {"role": "owners"}), 422)
    assert_error(api.put_json("/api/teams/team-a/members/ghost", {"role": "viewers"}), 404,
                 "user_not_found")
    assert api.delete("/api/teams/team-a/members/bob").status_code == 204
    assert list(Membership.objects.values_list("user__username", flat=True)) == ["alice"]
    viewer = make_user("val")
    membership_set(user=viewer, team=a, role="viewers")
    as_viewer = ApiClient(apikey_create(user=viewer, name="t", team=a)[1], viewer)
    assert_error(as_viewer.get("/api/teams/team-a/members"), 403)


def test_the_cli_creates_a_team_and_a_member_of_it_only(teams, capsys):
    call_command("agentops", "createteam", "ops", "--name", "Operations")
    call_command("agentops", "createuser", "carol", "--role", "operators", "--team", "ops")
    out = capsys.readouterr().out
    assert "team ops (Operations) created" in out and "in team ops only" in out
    carol = Membership.objects.get(user__username="carol")
    assert carol.team.slug == "ops" and carol.role == OPERATOR
    assert not carol.user.groups.exists()
    assert team_ids_for(carol.user) == frozenset({carol.team_id})
    with pytest.raises(CommandError, match="no team 'nosuch'"):
        call_command("agentops", "createuser", "dan", "--role", "viewers", "--team", "nosuch")
    with pytest.raises(CommandError, match="exactly one --role"):
        call_command("agentops", "createuser", "dan", "--role", "viewers", "--role",
                     "support", "--team", "ops")


def test_a_saved_view_of_a_team_is_hidden_once_its_owner_leaves_the_team(teams):
    a, b, _ = teams
    erin = make_user("erin")
    membership_set(user=erin, team=a, role="viewers")
    membership_set(user=erin, team=b, role="viewers")
    client = _console(erin)
    client.post("/views/", {"name": "A failures", "query": "tab=failed", "team": "team-a"})
    client.post("/views/", {"name": "Everything", "query": "tab=all"})
    assert dict(SavedView.objects.values_list("name", "team__slug")) == {
        "A failures": "team-a", "Everything": None}
    assert 'data-saved-view="A failures"' in client.get("/").content.decode()
    membership_set(user=erin, team=a, role=None)
    page = _console(erin).get("/").content.decode()
    assert 'data-saved-view="A failures"' not in page
    assert 'data-saved-view="Everything"' in page
    refused = client.post("/views/", {"name": "Theirs", "query": "tab=all", "team": "team-a"})
    assert refused.status_code == 303 and not SavedView.objects.filter(name="Theirs").exists()


def test_a_team_member_refused_a_page_still_sees_their_team_role_and_what_the_audit_shows(teams):
    a, _, alice = teams
    carol = make_user("carol")
    membership_set(user=carol, team=a, role=OPERATOR)
    refused = _console(carol).get("/teams/")
    body = refused.content.decode()
    assert refused.status_code == 403 and "Not allowed" in body
    assert "team-a: operators" in body  # the top bar keeps the team role on the refusal
    settings_page = _console(alice).get("/settings/").content.decode()
    assert "The installation's admins set them." in settings_page  # not "Add one" to her
    audit = _console(alice).get("/audit/").content.decode()
    assert "data-audit-scope" in audit and "Nothing has been done to your teams" in audit
    assert "data-audit-scope" not in _console(make_user("root", "admins")).get("/audit/"
                                                                               ).content.decode()


def test_a_one_team_member_sees_a_team_filter_they_did_not_pick_from_a_list(teams):
    a, b, _ = teams
    make_run(team=a)
    carol = make_user("carol")
    membership_set(user=carol, team=a, role=OPERATOR)
    client = _console(carol)
    unfiltered = client.get("/?tab=all").content.decode()
    assert "All 1 matching this view" in unfiltered and "data-team-chip" not in unfiltered
    filtered = client.get("/?tab=all&team=team-b").content.decode()
    assert 'data-team-chip>team team-b' in filtered  # why the list is empty, and Clear
    assert "All matching this view" in filtered  # the tab's count ignores the filters
