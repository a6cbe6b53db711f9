"""Teams own runs: every page and API endpoint x each role x own team / other team.

Generated from the URL conf (a resolver walk) and the OpenAPI document: each route and
operation has its cases in tests/api/team_matrix_cases.py (an unknown one fails here), each
case is requested by a viewer, operator, support and admin who is a member of team A only
(A owns every object the path names) and by the same roles in team B only. Team B never gets
a 2xx naming A's objects (A's run id, goal, agent, tool call, approval arguments, audit
reason, saved view, key ...), never a 2xx on a path naming one of A's objects, and never
changes anything of team A (checked in the database; every cell is rolled back after).
Team A's members are not shut out of their own objects (no 404). Prints the number of cells.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from agentops.api import api
from approvals.apikeys import apikey_create
from approvals.models import Approval, ApiKey, Intervention, Membership, NotifyRule
from approvals.users import membership_set
from ledger.artifacts import artifact_put
from ledger.models import ToolCall, ToolLimit
from runs.models import BudgetPolicy, Event, Run, SavedView, Signal, Snapshot, Team
from runs.services_saved_views import saved_view_create
from runs.services_signals import run_signal
from tests.api import team_matrix_cases as cases
from agentops.agents import Agent, StepSpec, registry
from agentops.llm.scripted import ScriptedModel, call, say
from ledger.errors import ToolPermissionDenied
from runs.services import run_start
from tests.conftest import drive
from tests.console_factories import (PASSWORD, ROLE_USERS, make_approval, make_intervention,
                                     make_run)
from tests.engine_agents import TOOLS
from tests.engine_agents import world as engine_world

GOAL = "ALPHA-MATRIX-GOAL refund the order"


def _blocked_run(team: Team) -> Run:
    """Return team ``team``'s run, driven by the engine until a permanent error blocks it."""
    engine_world.fail_next["lookup"] = [ToolPermissionDenied("no access to region eu")]
    registry.register(Agent(
        name="alpha-matrix-agent", version="1", system_prompt="test", tools=TOOLS,
        plan=[StepSpec("prep"), StepSpec("check")], model=lambda: ScriptedModel({
            "prep": [call("lookup", item="book"), say("looked")],
            "check": [call("lookup", item="eu"), say("checked")]})))
    run = run_start(agent="alpha-matrix-agent", goal=GOAL, team=team)
    assert drive(run) == "blocked"
    run.refresh_from_db()
    return run


@pytest.fixture
def world(db, agent, engine) -> dict[str, Any]:
    """Teams alpha and beta, a member per role in each, and alpha's run with everything on it."""
    alpha = Team.objects.create(slug="alpha", name="Alpha Matrix Team")
    beta = Team.objects.create(slug="beta", name="Beta Team")
    users = {}
    for team in (alpha, beta):
        for name, role in ROLE_USERS.items():
            user = User.objects.create_user(f"{name}-{team.slug}", password=PASSWORD)
            membership_set(user=user, team=team, role=role)
            users[(name, team.slug)] = user
    run = _blocked_run(alpha)
    tc = ToolCall.objects.get(tool_call_id=run.current_tool_call)
    ToolCall.objects.filter(pk=tc.pk).update(summary="ALPHA-MATRIX-SUMMARY")
    sha = artifact_put(b"ALPHA-MATRIX-ARTIFACT", content_type="text/plain")
    ToolCall.objects.filter(pk=tc.pk).update(artifact_sha256=sha)
    approval = make_approval(run, args={"to": "alpha-matrix@example.com"})
    snap = Snapshot.objects.filter(run=run).order_by("seq").values_list("seq", flat=True).first()
    assert snap, "the engine keeps snapshots of the run"
    run_signal(run=run, name="alpha-matrix-signal", payload={}, key="a1")
    make_intervention(actor=users[("operator", "alpha")], run=run, reason="ALPHA-MATRIX-AUDIT")
    make_run(goal=f"{GOAL} (child)", agent="alpha-matrix-agent", parent=run, team=alpha)
    view = saved_view_create(user=users[("viewer", "alpha")], name="alpha-matrix-view",
                             query="tab=all")
    key, _ = apikey_create(user=users[("operator", "alpha")], name="alpha-matrix-key",
                           team=alpha)
    policy = BudgetPolicy.objects.create(team=alpha, agent_name="alpha-matrix-policy-agent",
                                         max_tokens=10_000)
    ToolLimit.objects.create(team=alpha, tool="alpha_matrix_tool", concurrency=7)
    rule = NotifyRule.objects.create(team=alpha, name="alpha-matrix-rule", channel="hook")
    run.refresh_from_db()
    fill = {"run": str(run.pk), "run8": str(run.pk)[:8], "seq": "1", "sha": sha,
            "approval": str(approval.pk), "tc": tc.tool_call_id, "view": str(view.pk),
            "key": str(key.pk), "snap": str(snap), "goal": "ALPHA-MATRIX-GOAL", "policy": str(policy.pk),
            "rule": str(rule.pk), "team": str(alpha.pk)}
    markers = [GOAL, "ALPHA-MATRIX-GOAL", str(run.pk), str(run.pk)[:8], tc.tool_call_id,
               "alpha-matrix@example.com", "ALPHA-MATRIX-SUMMARY", "alpha-matrix-agent",
               "ALPHA-MATRIX-AUDIT", "alpha-matrix-signal", "alpha-matrix-view",
               "alpha-matrix-key", "Alpha Matrix Team", sha, "alpha-matrix-policy-agent",
               "alpha_matrix_tool", "alpha-matrix-rule"]
    return {"alpha": alpha, "users": users, "fill": fill, "markers": markers, "run": run}


def _walk(resolver: URLResolver, prefix: str = "") -> Iterator[str]:
    for p in resolver.url_patterns:
        if isinstance(p, URLResolver):
            yield from _walk(p, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern)


def _openapi() -> dict[tuple[str, str], dict]:
    paths = api.get_openapi_schema()["paths"]
    return {(m.upper(), path): op for path, item in paths.items() for m, op in item.items()}


def _all_cases() -> list[cases.Case]:
    """Return the cases of every route and operation; fail on one the matrix does not know."""
    operations = _openapi()
    api_paths = {path for _, path in operations}
    unknown = []
    for route in _walk(get_resolver()):
        if route.startswith(cases.ADMIN_PREFIX) or route in cases.CONSOLE_PUBLIC:
            continue
        if route.startswith("api/"):
            as_openapi = "/" + route.replace("<", "{").replace(">", "}")
            if as_openapi not in api_paths:
                unknown.append(f"API route {route} (not in the OpenAPI document)")
        elif route not in cases.CONSOLE:
            unknown.append(f"page {route!r}")
    unknown += [f"operation {m} {p}" for m, p in operations if (m, p) not in cases.API]
    assert not unknown, ("routes outside the team matrix: give each its cases in "
                         f"tests/api/team_matrix_cases.py: {unknown}")
    return [c for group in (*cases.CONSOLE.values(), *cases.API.values()) for c in group]


def _filled(value: Any, fill: dict[str, str]) -> Any:
    if isinstance(value, str):
        for name, text in fill.items():
            value = value.replace("{" + name + "}", text)
        return value
    if isinstance(value, list):
        return [_filled(v, fill) for v in value]
    if isinstance(value, dict):
        return {k: _filled(v, fill) for k, v in value.items()}
    return value


def _team_a_state(team: Team) -> tuple:
    """Return everything of team A a request could change."""
    runs = Run.objects.filter(team=team).order_by("pk")
    return (
        list(runs.values_list("pk", "status", "last_seq", "updated_at", "cancel_requested")),
        Event.objects.filter(run__team=team).count(),
        Intervention.objects.filter(run__team=team).count(),
        list(Approval.objects.filter(run__team=team).order_by("pk")
             .values_list("pk", "status", "version")),
        Signal.objects.filter(run__team=team).count(),
        list(ToolCall.objects.filter(run__team=team).order_by("pk").values_list("pk", "status")),
        list(SavedView.objects.filter(user__memberships__team=team).values_list("pk", "query")),
        list(ApiKey.objects.filter(team=team).order_by("pk")
             .values_list("pk", "revoked_at", "key_hash")),
        list(BudgetPolicy.objects.filter(team=team).order_by("pk").values_list("pk", "max_tokens")),
        list(ToolLimit.objects.filter(team=team).order_by("pk").values_list("pk", "concurrency")),
        list(NotifyRule.objects.filter(team=team).order_by("pk").values_list("pk", "name")),
        list(Membership.objects.filter(team=team).order_by("pk").values_list("pk", "role")),
    )


def _request(client: Client, case: cases.Case, fill: dict[str, str]):
    path, body = _filled(case.path, fill), _filled(case.body, fill)
    if case.json:
        data = json.dumps(body) if body is not None else ""
        return client.generic(case.method, path, data, content_type="application/json"), path, data
    if case.method == "GET":
        return client.get(path), path, ""
    return client.post(path, body or {}), path, json.dumps(body)


def _cell(client: Client, case: cases.Case, world: dict[str, Any]) -> tuple[Any, str, bool]:
    """Make one request in a savepoint that is rolled back; return the response, what the
    request itself carried, and whether team A's data changed."""
    with transaction.atomic():
        before = _team_a_state(world["alpha"])
        response, path, data = _request(client, case, world["fill"])
        if response.streaming:  # read it now, while the savepoint still holds its rows
            response.read_body = b"".join(response.streaming_content)
        changed = _team_a_state(world["alpha"]) != before
        transaction.set_rollback(True)
    return response, path + data, changed


def _leaks(response: Any, sent: str, markers: list[str]) -> list[str]:
    """Return A's markers in the response that the request did not carry itself."""
    body = response.read_body if response.streaming else response.content
    text = body.decode(errors="replace") + response.get("Location", "")
    return [m for m in markers if m in text and m not in sent]


def _check(case: cases.Case, who: str, team: str, response: Any, sent: str, changed: bool,
           markers: list[str]) -> list[str]:
    cell = f"{case.method} {case.path} as {who} of {team}: {response.status_code}"
    problems = [f"{cell} is a server error"] if response.status_code >= 500 else []
    if team == "alpha":
        if case.own_ok and case.kind == "object" and response.status_code == 404:
            problems.append(f"{cell}: a member cannot reach their own team's object")
        return problems
    if changed:
        problems.append(f"{cell} changed team A's data")
    if response.status_code < 400 and (leaked := _leaks(response, sent, markers)):
        problems.append(f"{cell} reveals team A's {leaked}")
    if case.kind == "object" and response.status_code < 400:
        problems.append(f"{cell}: a 2xx/3xx on a path naming team A's object")
    return problems


def test_no_cell_of_the_matrix_reads_or_writes_another_teams_data(world, capsys):
    all_cases, problems, cells = _all_cases(), [], 0
    for (who, team), user in world["users"].items():
        client = Client(raise_request_exception=False)
        client.force_login(user)
        for case in all_cases:
            response, sent, changed = _cell(client, case, world)
            problems += _check(case, who, team, response, sent, changed, world["markers"])
            cells += 1
        admin = client.get("/admin/")  # Django's admin: staff only, no team role gives it
        assert admin.status_code == 302 and "/admin/login/" in admin["Location"]
        cells += 1
    with capsys.disabled():
        print(f"\nteam matrix: {cells} cells ({len(all_cases) + 1} requests x "
              f"{len(world['users'])} users), {len(problems)} problems")
    assert problems == [], "\n".join(problems)


def test_the_matrix_sees_a_leak_when_there_is_one(world):
    """The markers are real: the same pages show them to team A (the check can fail)."""
    client = Client()
    client.force_login(world["users"][("viewer", "alpha")])
    page = client.get(f"/runs/{world['run'].pk}/")
    assert page.status_code == 200 and GOAL in page.content.decode()
    listed = client.get("/api/runs").json()["items"]
    assert [r["team"] for r in listed if r["id"] == str(world["run"].pk)] == ["alpha"]
    queue = client.get("/?tab=all").content.decode()
    assert str(world["run"].pk)[:8] in queue and "alpha-matrix-agent" in queue
