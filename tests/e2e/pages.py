"""Every console page in one table (PAGES): the axe check and `make screens` open each one.

A row is a named console URL (runs/urls.py, namespace "console") filled in from the seeded
demo (``demo_world``), the roles that may open it, and optionally a key or a click that opens
a dialog on it. tests/test_console_pages.py fails when a named console URL is in neither
PAGES nor NOT_PAGES, so a new page cannot be forgotten: add its row here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

VIEW = ("viewer", "operator", "support", "admin")
OPERATE = ("operator", "admin")
DECIDE = ("support", "admin")
ADMIN = ("admin",)
ROLES = VIEW


@dataclass(frozen=True)
class ConsolePage:
    """One page (or dialog) to check and to photograph."""

    name: str  # unique; also the screenshot's file name
    url_name: str  # console:<url_name>
    args: tuple[str, ...] = ()  # "{key}" is filled from demo_world(); anything else is literal
    query: str = ""
    roles: tuple[str, ...] = VIEW  # who opens it (a user in another role gets a 403)
    click: str = ""  # then click this (opens a dialog or a fold) ...
    press: str = ""  # ... or press this key
    wait: str = ""  # and wait for this to show
    status: int = 200
    anonymous: bool = False  # opened signed out

    def path(self, world: dict[str, Any]) -> str:
        """Return the page's path and query for the seeded ``world``."""
        from django.urls import reverse

        args = [a.format(**world) for a in self.args]
        return reverse(f"console:{self.url_name}", args=args) + (
            f"?{self.query.format(**world)}" if self.query else "")


def _dialog(name: str, run: str, verb: str, roles: tuple[str, ...] = OPERATE) -> ConsolePage:
    return ConsolePage(name, "run", (run,), roles=roles, click=f".actions [data-verb={verb}]",
                       wait="#confirm[open] #confirm-body > *")


_TABS = ("waiting", "blocked", "unknown", "approvals", "running", "succeeded", "exceptions",
         "failed", "cancelled", "all")

PAGES: tuple[ConsolePage, ...] = (
    ConsolePage("login", "login", anonymous=True),
    *(ConsolePage(f"queue-{tab}", "queue", query=f"tab={tab}") for tab in _TABS),
    ConsolePage("queue-groups", "queue", query="tab=all&view=groups"),
    ConsolePage("queue-search", "queue", query="tab=all&q={blocked_short}"),
    ConsolePage("queue-keys-sheet", "queue", press="?", wait="#cheatsheet[open]"),
    ConsolePage("run-blocked-permission", "run", ("{blocked}",)),
    ConsolePage("run-blocked-budget", "run", ("{budget}",)),
    ConsolePage("run-blocked-loop", "run", ("{loop}",)),
    ConsolePage("run-unknown", "run", ("{unknown}",)),
    ConsolePage("run-waiting-approval", "run", ("{waiting}",)),
    ConsolePage("run-waiting-timer", "run", ("{timer}",)),
    ConsolePage("run-queued", "run", ("{queued}",)),
    ConsolePage("run-history", "run_history", ("{blocked}",)),
    ConsolePage("run-history-why", "run_history", ("{blocked}",), query="why=3"),
    ConsolePage("run-trace", "run_trace", ("{succeeded}",)),
    ConsolePage("run-trace-blocked", "run_trace", ("{blocked}",), click="[data-call] summary",
                wait="[data-call][open] .trace-io"),
    ConsolePage("run-succeeded", "run", ("{succeeded}",)),
    ConsolePage("run-cancelled", "run", ("{cancelled}",)),
    ConsolePage("run-context", "run", ("{blocked}",), click="details:has(#context-body) summary",
                wait="#context-body :not(:has-text('Loading'))"),
    ConsolePage("run-keys-sheet", "run", ("{unknown}",), press="?", wait="#cheatsheet[open]"),
    ConsolePage("run-decide-dialog", "run", ("{unknown}",), roles=OPERATE, press="d",
                wait="#confirm[open] #confirm-body > *"),
    _dialog("dialog-retry", "{blocked}", "retry"),
    _dialog("dialog-raise-budget", "{budget}", "raise_budget", ADMIN),
    _dialog("dialog-skip", "{loop}", "skip"),
    _dialog("dialog-rollback", "{loop}", "rollback"),
    _dialog("dialog-terminate", "{blocked}", "terminate"),
    _dialog("dialog-confirm-executed", "{unknown}", "confirm_executed"),
    _dialog("dialog-edit-plan", "{blocked}", "edit_plan"),
    _dialog("dialog-restart", "{blocked}", "restart"),
    ConsolePage("confirm-page-retry", "run_action", ("{blocked}", "retry"), roles=OPERATE),
    ConsolePage("confirm-page-rollback", "run_action", ("{loop}", "rollback"), roles=OPERATE),
    ConsolePage("bulk-selected", "bulk", query="tab=blocked&run={blocked}&run={budget}",
                roles=OPERATE),
    ConsolePage("bulk-all-matching", "bulk", query="tab=blocked&all=1", roles=OPERATE),
    ConsolePage("inbox", "inbox"),
    ConsolePage("inbox-edit", "inbox", roles=DECIDE, click="details.edit summary",
                wait="details.edit[open] textarea"),
    ConsolePage("audit", "audit"),
    ConsolePage("world", "world"),
    ConsolePage("settings", "settings", roles=ADMIN),
    ConsolePage("settings-not-allowed", "settings", roles=("viewer",), status=403),
    ConsolePage("settings-new-budget", "settings_new", ("budget",), roles=ADMIN),
    ConsolePage("settings-edit-budget", "settings_edit", ("budget", "{policy}"), roles=ADMIN),
    ConsolePage("settings-new-tool-limit", "settings_new", ("tool-limit",), roles=ADMIN),
    ConsolePage("settings-edit-tool-limit", "settings_edit", ("tool-limit", "{tool_limit}"),
                roles=ADMIN),
    ConsolePage("settings-new-price", "settings_new", ("price",), roles=ADMIN),
    ConsolePage("settings-edit-price", "settings_edit", ("price", "{price}"), roles=ADMIN),
    ConsolePage("teams", "teams", roles=ADMIN),
    ConsolePage("team", "team", ("payments",), roles=ADMIN),
    ConsolePage("api-keys", "api_keys"),
    ConsolePage("run-not-found", "run", ("00000000-0000-4000-8000-000000000000",), status=404),
)

# Named console URLs that are not pages of their own, and why.
NOT_PAGES = {
    "logout": "POST only: signs out and redirects to the login page (or, after single "
              "sign-on, a page that moves on to the provider's end-session)",
    "oidc_start": "a redirect to the identity provider (404 unless single sign-on is on)",
    "oidc_callback": "the identity provider's redirect back; signs in and redirects",
    "run_events": "a fragment: the run page's Events card (checked on every run-* page)",
    "run_ledger": "a fragment: the run page's Ledger card (checked on every run-* page)",
    "run_context": "a fragment loaded into the run page (checked on run-context)",
    "run_fork": "POST only: starts a run and redirects to it",
    "run_artifact": "plain text (a tool's output or log), never HTML",
    "approval_decide": "POST only: decides and redirects to the inbox",
    "approval_diff": "a fragment of the inbox's edit form",
    "saved_view_save": "POST only: saves the queue's filters as a view and redirects to it",
    "saved_view_remove": "POST only: deletes a saved view and redirects to the queue",
    "theme": "POST only: sets the colour theme cookie and redirects back",
    "decision_link": "opened from a signed link in a message (needs a fresh token): "
                     "tests/e2e/test_decision_link_page.py opens it in Chromium",
    "slack_interactions": "POST only: JSON answers to Slack-compatible button presses",
    "api_key_rotate": "POST only: shows the API keys page with the new secret once",
    "api_key_revoke": "POST only: revokes a key and redirects to the API keys page",
}

# Whole namespaces (and top-level names) that are not console pages.
NOT_PAGE_NAMESPACES = {
    "admin": "Django's own admin site (staff only), not the console",
    "api": "the REST API: JSON, not pages",
    "healthz": "a health check for load balancers (plain text)",
    "readyz": "a readiness check (plain text)",
    "metrics": "Prometheus metrics (plain text)",
}


def demo_world() -> dict[str, Any]:
    """Seed the demo (users, runs in every state) and return what PAGES fill their URLs with."""
    from agentops.demo.seed import demo_seed
    from ledger.models import ToolLimit
    from runs.models import BudgetPolicy, ModelPrice

    _, runs = demo_seed()
    # Settings rows so their edit pages exist (the demo sets none).
    policy, _ = BudgetPolicy.objects.get_or_create(agent_name="sales-report",
                                                   defaults={"max_tokens": 50_000})
    limit, _ = ToolLimit.objects.get_or_create(tool="track_logistics",
                                               defaults={"rate_per_minute": 30})
    price, _ = ModelPrice.objects.get_or_create(
        model="gpt-4o-mini", defaults={"input_per_mtok_micros": 150_000,
                                       "output_per_mtok_micros": 600_000})
    pick = {"blocked": "sales-eu-denied", "budget": "sales-budget", "loop": "carrier-loop",
            "unknown": "email-unknown", "waiting": "refund-approval",
            "timer": "carrier-rate-limited", "queued": "document-batch",
            "succeeded": "sales-ok", "cancelled": "refund-terminated"}
    world: dict[str, Any] = {key: str(runs[name].pk) for key, name in pick.items()}
    world.update(blocked_short=world["blocked"][:8], policy=policy.pk, tool_limit=limit.pk,
                 price=price.pk)
    return world


def open_page(page: Any, base_url: str, spec: ConsolePage, world: dict[str, Any]) -> None:
    """Open ``spec`` in a Playwright ``page`` (signed in already) and do its key or click."""
    response = page.goto(base_url + spec.path(world))
    assert response is not None and response.status == spec.status, (
        f"{spec.name}: HTTP {response and response.status}, expected {spec.status}")
    page.wait_for_load_state("load")
    if spec.click:
        page.locator(spec.click).first.click()
    if spec.press:
        page.keyboard.press(spec.press)
    if spec.wait:
        page.locator(spec.wait).first.wait_for()
