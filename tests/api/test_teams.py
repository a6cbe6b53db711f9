"""Per-team roles over the API and in the console: the caller's teams, which team a new run
lands in, actions and bulk actions only where the role holds, buttons only there too."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from approvals.apikeys import apikey_create
from approvals.roles import OPERATOR, SUPPORT, VIEWER
from approvals.users import membership_set
from runs.models import Run, Team
from tests.api.conftest import ApiClient
from tests.console_factories import PASSWORD, make_approval, make_attention_run, make_user

pytestmark = pytest.mark.django_db

BODY = {"agent": "api-test-agent", "goal": "book a room"}


@pytest.fixture
def teams(db) -> tuple[Team, Team]:
    """Teams alpha and beta."""
    return (Team.objects.create(slug="alpha", name="Alpha"),
            Team.objects.create(slug="beta", name="Beta"))


def _person(name: str, **roles: tuple[Team, str]) -> tuple[User, Client]:
    user = User.objects.create_user(name, password=PASSWORD)
    for team, role in roles.values():
        membership_set(user=user, team=team, role=role)
    client = Client()
    client.force_login(user)
    return user, client


def test_get_teams_lists_the_callers_teams_and_roles(teams):
    alpha, beta = teams
    _, client = _person("mia", a=(alpha, OPERATOR), b=(beta, VIEWER))
    body = client.get("/api/teams").json()
    assert body["installation_roles"] == []
    assert [(t["slug"], t["role"], t["installation_wide"]) for t in body["teams"]] == [
        ("alpha", "operators", False), ("beta", "viewers", False)]
    wide = Client()
    wide.force_login(make_user("wendy", SUPPORT))
    slugs = {t["slug"]: t["role"] for t in wide.get("/api/teams").json()["teams"]}
    assert slugs == {"alpha": "support", "beta": "support", "default": "support"}


def test_a_run_starts_in_the_callers_only_team_and_shows_it(teams, agent):
    alpha, beta = teams
    _, client = _person("ola", a=(alpha, OPERATOR), b=(beta, VIEWER))
    response = client.post("/api/runs", BODY, content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["team"] == "alpha"
    assert Run.objects.get(pk=response.json()["id"]).team == alpha


def test_a_caller_in_several_teams_names_one_and_only_where_they_operate(teams, agent):
    alpha, beta = teams
    _, both = _person("bo", a=(alpha, OPERATOR), b=(beta, OPERATOR))
    response = both.post("/api/runs", BODY, content_type="application/json")
    assert response.status_code == 422
    assert "several teams (alpha, beta)" in response.json()["error"]["message"]
    named = both.post("/api/runs", {**BODY, "team": "beta"}, content_type="application/json")
    assert named.status_code == 201 and named.json()["team"] == "beta"
    _, viewer_in_beta = _person("vi", a=(alpha, OPERATOR), b=(beta, VIEWER))
    for slug in ("beta", "no-such-team"):
        refused = viewer_in_beta.post("/api/runs", {**BODY, "team": slug},
                                      content_type="application/json")
        assert refused.status_code == 403
        assert f"cannot start runs in team '{slug}'" in refused.json()["error"]["message"]
    assert Run.objects.count() == 1


def test_an_installation_wide_operator_starts_runs_in_the_default_team(teams, agent):
    client = Client()
    client.force_login(make_user("root-op", OPERATOR))
    response = client.post("/api/runs", BODY, content_type="application/json")
    assert response.status_code == 201 and response.json()["team"] == "default"


def test_actions_need_the_role_in_the_runs_team(teams):
    alpha, beta = teams
    _, client = _person("ava", a=(alpha, OPERATOR), b=(beta, VIEWER))
    run_a = make_attention_run(goal="alpha", team=alpha)
    run_b = make_attention_run(goal="beta", team=beta)
    page_a = client.get(f"/runs/{run_a.pk}/").content.decode()
    page_b = client.get(f"/runs/{run_b.pk}/").content.decode()
    assert 'data-team="alpha"' in page_a and 'data-team="beta"' in page_b
    assert 'data-verb="retry"' in page_a
    assert 'data-verb="' not in page_b  # no buttons where the role does not hold
    body = {"action": "terminate", "reason": "r", "confirm": "terminate"}
    refused = client.post(f"/api/runs/{run_b.pk}/actions", body, content_type="application/json")
    assert refused.status_code == 403 and "role in the run's team" in refused.json()["error"][
        "message"]
    done = client.post(f"/api/runs/{run_a.pk}/actions", body, content_type="application/json")
    assert done.status_code == 200, done.content
    assert Run.objects.get(pk=run_b.pk).status == "blocked"


def test_bulk_by_filter_skips_runs_of_teams_where_the_role_does_not_hold(teams):
    alpha, beta = teams
    _, client = _person("bea", a=(alpha, OPERATOR), b=(beta, VIEWER))
    run_a = make_attention_run(goal="alpha", team=alpha)
    run_b = make_attention_run(goal="beta", team=beta)
    make_attention_run(goal="gamma")  # the default team: not seen, not counted, not touched
    response = client.post("/api/runs/bulk-actions", {
        "action": "terminate", "reason": "r", "confirm": "terminate", "filter": {}},
        content_type="application/json")
    assert response.status_code == 200, response.content
    body = response.json()
    results = {r["run_id"]: r for r in body["results"]}
    assert body["count"] == 2 and set(results) == {str(run_a.pk), str(run_b.pk)}
    assert results[str(run_a.pk)]["outcome"] == "done"
    skipped = results[str(run_b.pk)]
    assert skipped["outcome"] == "skipped" and "in team beta" in skipped["detail"]
    assert Run.objects.get(pk=run_b.pk).status == "blocked"
    page = client.post("/bulk/", {"tab": "all", "all": "1", "verb": "terminate",
                                  "bulk_reason": "again", "confirm": "terminate"})
    assert "1 skipped (your role does not hold in their team)" in page.content.decode()


def test_the_inbox_offers_decisions_only_in_support_teams(teams):
    alpha, beta = teams
    _, client = _person("sue", a=(alpha, SUPPORT), b=(beta, VIEWER))
    mine = make_approval(make_attention_run(goal="alpha", team=alpha))
    theirs = make_approval(make_attention_run(goal="beta", team=beta))
    hidden = make_approval(make_attention_run(goal="gamma"))
    page = client.get("/approvals/").content.decode()
    assert f'id="approval-{mine.pk}"' in page and f'id="approval-{theirs.pk}"' in page
    assert f'id="approval-{hidden.pk}"' not in page
    assert f"/approvals/{mine.pk}/approve/" in page
    assert f"/approvals/{theirs.pk}/approve/" not in page


def test_the_queue_shows_and_filters_by_team_for_people_in_several(teams):
    alpha, beta = teams
    _, client = _person("tim", a=(alpha, VIEWER), b=(beta, VIEWER))
    run_a = make_attention_run(goal="alpha", team=alpha)
    run_b = make_attention_run(goal="beta", team=beta)
    page = client.get("/?tab=all").content.decode()
    assert '<select name="team"' in page and "<th>Team</th>" in page
    assert "alpha: viewers" in page and "beta: viewers" in page  # the top bar
    only_beta = client.get("/?tab=all&team=beta").content.decode()
    assert str(run_b.pk)[:8] in only_beta and str(run_a.pk)[:8] not in only_beta
    _, single = _person("uma", a=(alpha, VIEWER))
    assert '<select name="team"' not in single.get("/?tab=all").content.decode()


def test_a_key_sees_and_acts_in_its_one_team_even_when_its_owner_has_more(teams, agent):
    """An operator of alpha and beta with a key of alpha: the key never reaches beta's runs."""
    alpha, beta = teams
    owner, _ = _person("kim", a=(alpha, OPERATOR), b=(beta, OPERATOR))
    mine, theirs = (make_attention_run(goal=f"refund for {t.slug}", team=t) for t in teams)
    api = ApiClient(apikey_create(user=owner, name="ci", team=alpha)[1], owner)
    listed = [r["id"] for r in api.get("/api/runs?status=blocked").json()["items"]]
    assert listed == [str(mine.pk)]
    assert api.get(f"/api/runs/{theirs.pk}").status_code == 404
    refused = api.post_json(f"/api/runs/{theirs.pk}/actions",
                            {"action": "terminate", "reason": "key of alpha",
                             "confirm": "terminate"})
    assert refused.status_code == 404
    assert Run.objects.get(pk=theirs.pk).status == "blocked"
    started = api.post_json("/api/runs", {**BODY, "team": "beta"})
    assert started.status_code == 403, started.content
    made = api.post_json("/api/runs", BODY)
    assert made.status_code == 201 and made.json()["team"] == "alpha", made.content
