"""The cases of the team matrix (tests/api/test_team_matrix.py): what to request per route.

Every URL pattern of the project and every OpenAPI operation must have an entry here or in
an allow-list (with the reason it is outside the matrix); a new endpoint without one fails
the matrix, so nothing escapes it. Paths use placeholders filled with team A's objects:
{run} {run8} {seq} {sha} {approval} {tc} {view} {key} {goal} {policy} {rule}.

``kind`` says what team B may get back:
- "object": the path names one of team A's objects; B must never get a 2xx about it.
- "list": a list, count or search made with A's data present; B may get 2xx without it.
- "user": one person's own object (a saved view, an API key): nobody else, in any team, reads
  or changes it; a refusal may redirect back with a message (checked: nothing changed).
Team A's settings (its budget policy {policy}, tool limit alpha_matrix_tool, notification
rule {rule}) are its objects like its runs: a list shows them only to A's admins, a path
naming one is A's object.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Case:
    """One request of the matrix (made once per user)."""

    method: str
    path: str
    kind: str = "object"
    body: dict[str, Any] | None = None
    json: bool = False
    own_ok: bool = True  # team A's members (with the role) get something other than 404
    tags: tuple[str, ...] = field(default_factory=tuple)


def _g(path: str, kind: str = "object", **kw: Any) -> Case:
    return Case("GET", path, kind, **kw)


def _p(path: str, body: dict[str, Any], kind: str = "object", **kw: Any) -> Case:
    return Case("POST", path, kind, body, **kw)


def _j(method: str, path: str, body: dict[str, Any] | None = None, kind: str = "object",
       **kw: Any) -> Case:
    return Case(method, path, kind, body, json=True, **kw)


REASON = {"reason": "matrix: should change nothing of team A"}

# Console routes as the resolver spells them (app "console", mounted at /).
CONSOLE: dict[str, list[Case]] = {
    "": [_g("/", "list"), _g("/?tab=all", "list"), _g("/?tab=all&q={run}", "list"),
         _g("/?tab=all&q={run8}", "list"), _g("/?tab=all&q={goal}", "list"),
         _g("/?tab=blocked&view=groups", "list"), _g("/?tab=all&team=alpha", "list")],
    "bulk/": [_g("/bulk/?tab=blocked&all=1&verb=retry", "list"),
              _g("/bulk/?run={run}&verb=retry", "list"),
              _p("/bulk/", {"tab": "blocked", "all": "1", "verb": "retry",
                            "bulk_reason": "matrix"}, "list"),
              _p("/bulk/", {"run": ["{run}"], "verb": "retry", "bulk_reason": "matrix"},
                 "list")],
    "views/": [_p("/views/", {"name": "mine", "query": "tab=all&q={goal}"}, "list")],
    "views/<int:view_id>/delete/": [_p("/views/{view}/delete/", {}, "user", own_ok=False)],
    "theme/": [_p("/theme/", {"theme": "dark", "next": "/"}, "list")],
    "runs/<uuid:run_id>/": [_g("/runs/{run}/")],
    "runs/<uuid:run_id>/events/": [_g("/runs/{run}/events/")],
    "runs/<uuid:run_id>/history/": [_g("/runs/{run}/history/"),
                                    _g("/runs/{run}/history/?why=1")],
    "runs/<uuid:run_id>/trace/": [_g("/runs/{run}/trace/")],
    "runs/<uuid:run_id>/ledger/": [_g("/runs/{run}/ledger/")],
    "runs/<uuid:run_id>/context/": [_g("/runs/{run}/context/")],
    "runs/<uuid:run_id>/fork/": [_p("/runs/{run}/fork/", {"seq": "1"})],
    "runs/<uuid:run_id>/artifacts/<str:sha256>/": [_g("/runs/{run}/artifacts/{sha}/")],
    "runs/<uuid:run_id>/actions/<str:verb>/": [
        _g("/runs/{run}/actions/retry/"), _g("/runs/{run}/actions/terminate/"),
        _p("/runs/{run}/actions/retry/", {**REASON}),
        _p("/runs/{run}/actions/terminate/", {**REASON, "confirm": "terminate"})],
    "approvals/": [_g("/approvals/", "list")],
    "approvals/<int:approval_id>/diff/": [
        _p("/approvals/{approval}/diff/", {"args": '{"to": "x@example.com"}'})],
    "approvals/<int:approval_id>/<str:verb>/": [
        _p("/approvals/{approval}/approve/", {**REASON}),
        _p("/approvals/{approval}/reject/", {**REASON})],
    "settings/": [_g("/settings/", "list")],
    "settings/<str:kind>/new/": [_g("/settings/budget/new/", "list"),
                                 _p("/settings/budget/new/", {"team": "{team}", "agent_name": "m"},
                                    "list")],
    "settings/<str:kind>/<int:pk>/": [_g("/settings/budget/{policy}/"),
                                      _p("/settings/budget/{policy}/", {"max_tokens": "1"})],
    "teams/": [_g("/teams/", "list"), _p("/teams/", {"slug": "matrix", "name": "M"}, "list")],
    "teams/<slug:slug>/": [_g("/teams/alpha/"),
                           _p("/teams/alpha/", {"username": "viewer-beta", "role": "admins"})],
    "keys/": [_g("/keys/", "list"),
              _p("/keys/", {"name": "matrix", "team": "{team}", "role": "viewers"}, "list")],
    "keys/<int:key_id>/rotate/": [_p("/keys/{key}/rotate/", {"grace": "0"}, "user",
                                     own_ok=False)],
    "keys/<int:key_id>/revoke/": [_p("/keys/{key}/revoke/", {}, "user", own_ok=False)],
    "audit/": [_g("/audit/", "list"), _g("/audit/?run={run}", "list")],
    "world/": [_g("/world/", "list", own_ok=False)],
}

# Routes outside the matrix, and why.
CONSOLE_PUBLIC = {
    "login/": "the sign-in form: no run data",
    "logout/": "signs out: no run data",
    "oidc/authenticate/": "single sign-on: sends the browser to the OIDC provider",
    "oidc/callback/": "single sign-on: the provider's answer signs a person in (no run data)",
    "decide/<str:token>/": "decision links authenticate by their signed token, bound to one "
                           "person (tests/approvals/test_links.py); the action still checks "
                           "that person's role in the run's team",
    "integrations/slack/interactions/": "Slack's signed callback (tests/approvals/test_slack.py)",
    "healthz": "liveness: no data", "readyz": "readiness: no data",
    "metrics": "Prometheus counts for the local scraper (agentops_runs carries a team label)",
    "api/openapi.json": "the API description (no data)",
    "api/docs": "the API reference page (no data)",
    "api/": "the API root: its operations are the OpenAPI cases below",
    "api/^.*$": "the API's JSON 404 for unknown paths",
}
# Django's admin site: only staff reach it, and no team role makes anyone staff.
ADMIN_PREFIX = "admin/"

# OpenAPI operations (method, path as the document spells it).
API: dict[tuple[str, str], list[Case]] = {
    ("GET", "/api/runs"): [_j("GET", "/api/runs", kind="list"),
                           _j("GET", "/api/runs?text={run}", kind="list"),
                           _j("GET", "/api/runs?text={goal}", kind="list"),
                           _j("GET", "/api/runs?team=alpha", kind="list")],
    ("POST", "/api/runs"): [
        _j("POST", "/api/runs", {"agent": "api-test-agent", "goal": "b", "team": "alpha"},
           own_ok=False)],
    ("POST", "/api/runs/bulk-actions"): [
        _j("POST", "/api/runs/bulk-actions", {"action": "retry", **REASON, "run_ids": ["{run}"]},
           kind="list"),
        _j("POST", "/api/runs/bulk-actions", {"action": "retry", **REASON, "filter": {}},
           kind="list"),
        _j("POST", "/api/runs/bulk-actions",
           {"action": "retry", **REASON, "filter": {}, "preview": True}, kind="list")],
    ("GET", "/api/runs/{run_id}"): [_j("GET", "/api/runs/{run}")],
    ("GET", "/api/runs/{run_id}/steps"): [_j("GET", "/api/runs/{run}/steps")],
    ("GET", "/api/runs/{run_id}/events"): [_j("GET", "/api/runs/{run}/events")],
    ("GET", "/api/runs/{run_id}/events/{seq}/cause"): [
        _j("GET", "/api/runs/{run}/events/{seq}/cause")],
    ("GET", "/api/runs/{run_id}/tool-calls"): [_j("GET", "/api/runs/{run}/tool-calls")],
    ("GET", "/api/runs/{run_id}/snapshots"): [_j("GET", "/api/runs/{run}/snapshots")],
    ("GET", "/api/runs/{run_id}/snapshots/{seq}"): [_j("GET", "/api/runs/{run}/snapshots/{snap}")],
    ("GET", "/api/runs/{run_id}/signals"): [_j("GET", "/api/runs/{run}/signals")],
    ("POST", "/api/runs/{run_id}/signals"): [
        _j("POST", "/api/runs/{run}/signals", {"name": "poke", "payload": {}, "key": "m1"})],
    ("POST", "/api/runs/{run_id}/cancel"): [
        _j("POST", "/api/runs/{run}/cancel", {**REASON, "confirm": "terminate"})],
    ("POST", "/api/runs/{run_id}/fork"): [_j("POST", "/api/runs/{run}/fork", {"seq": 1})],
    ("POST", "/api/runs/{run_id}/actions/preview"): [
        _j("POST", "/api/runs/{run}/actions/preview", {"action": "retry"})],
    ("POST", "/api/runs/{run_id}/actions"): [
        _j("POST", "/api/runs/{run}/actions", {"action": "retry", **REASON})],
    ("GET", "/api/tool-calls/{tool_call_id}"): [
        _j("GET", "/api/tool-calls/{tc}"), _j("GET", "/api/tool-calls/{tc}?expand=true")],
    ("GET", "/api/approvals"): [_j("GET", "/api/approvals", kind="list"),
                                _j("GET", "/api/approvals?run_id={run}", kind="list")],
    ("GET", "/api/approvals/{approval_id}"): [_j("GET", "/api/approvals/{approval}")],
    ("POST", "/api/approvals/{approval_id}/decide"): [
        _j("POST", "/api/approvals/{approval}/decide", {"decision": "reject", **REASON}),
        _j("POST", "/api/approvals/{approval}/decide", {"decision": "approve", **REASON})],
    ("GET", "/api/teams"): [_j("GET", "/api/teams", kind="list")],
    ("POST", "/api/keys"): [_j("POST", "/api/keys", {"name": "matrix"}, kind="list")],
    ("GET", "/api/keys"): [_j("GET", "/api/keys", kind="list")],
    ("DELETE", "/api/keys/{key_id}"): [_j("DELETE", "/api/keys/{key}", kind="user",
                                          own_ok=False)],
    ("POST", "/api/keys/{key_id}/rotate"): [_j("POST", "/api/keys/{key}/rotate", {},
                                               kind="user", own_ok=False)],
    ("GET", "/api/audit/export"): [_j("GET", "/api/audit/export?format=jsonl", kind="list"),
                                   _j("GET", "/api/audit/export?format=csv", kind="list"),
                                   _j("GET", "/api/audit/export?team=alpha", kind="list",
                                      own_ok=False)],
    ("GET", "/api/teams/{slug}/members"): [_j("GET", "/api/teams/alpha/members")],
    ("PUT", "/api/teams/{slug}/members/{username}"): [
        _j("PUT", "/api/teams/alpha/members/viewer-beta", {"role": "admins"})],
    ("DELETE", "/api/teams/{slug}/members/{username}"): [
        _j("DELETE", "/api/teams/alpha/members/viewer-alpha")],
    ("GET", "/api/notify/rules"): [_j("GET", "/api/notify/rules", kind="list")],
    ("POST", "/api/notify/rules"): [
        _j("POST", "/api/notify/rules", {"team": "alpha", "name": "m", "channel": "hook"},
           kind="list", own_ok=False)],
    ("PUT", "/api/notify/rules/{rule_id}"): [
        _j("PUT", "/api/notify/rules/{rule}", {"name": "m", "channel": "hook"})],
    ("DELETE", "/api/notify/rules/{rule_id}"): [_j("DELETE", "/api/notify/rules/{rule}")],
    ("GET", "/api/notify/deliveries"): [_j("GET", "/api/notify/deliveries?run_id={run}")],
    ("GET", "/api/admin/budget-policies"): [
        _j("GET", "/api/admin/budget-policies", kind="list")],
    ("POST", "/api/admin/budget-policies"): [
        _j("POST", "/api/admin/budget-policies", {"team": "alpha", "agent_name": "m"},
           kind="list", own_ok=False)],
    ("GET", "/api/admin/budget-policies/{policy_id}"): [
        _j("GET", "/api/admin/budget-policies/{policy}")],
    ("PATCH", "/api/admin/budget-policies/{policy_id}"): [
        _j("PATCH", "/api/admin/budget-policies/{policy}", {"max_tokens": 1})],
    ("GET", "/api/admin/tool-limits"): [_j("GET", "/api/admin/tool-limits", kind="list")],
    ("GET", "/api/admin/tool-limits/{tool}"): [
        _j("GET", "/api/admin/tool-limits/alpha_matrix_tool?team=alpha")],
    ("PUT", "/api/admin/tool-limits/{tool}"): [
        _j("PUT", "/api/admin/tool-limits/alpha_matrix_tool?team=alpha", {"concurrency": 1})],
}
