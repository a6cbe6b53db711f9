"""Admin settings (budget policies, tool limits, rules, prices) and the audit log.

Budget policies, tool limits and notification rules belong to a team: a team admin sees and
edits only their teams' (another team's id is 404); model prices are the installation's and
only installation admins change them.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET, require_http_methods

from approvals.forms import BudgetPolicyForm, ModelPriceForm, NotifyRuleForm, ToolLimitForm
from approvals.models import NotifyRule
from approvals.audit_sink import audit_sink_status
from approvals.roles import ADMIN, can_admin, is_installation_admin, team_ids_for
from approvals.selectors import settings_history
from approvals.services_settings import (
    budget_policy_save,
    model_price_save,
    notify_rule_save,
    tool_limit_save,
)
from approvals.teams import admin_scope, admin_team_slugs, admin_teams
from ledger.models import ToolLimit
from runs import selectors as sel
from runs.scope import visible_teams
from runs.models import BudgetPolicy, ModelPrice
from runs.views._common import int_or_none, page, role_required

_KINDS = {
    "budget": (BudgetPolicy, BudgetPolicyForm, budget_policy_save, "Budget policy"),
    "tool-limit": (ToolLimit, ToolLimitForm, tool_limit_save, "Tool limit"),
    "price": (ModelPrice, ModelPriceForm, model_price_save, "Model price"),
    "notify-rule": (NotifyRule, NotifyRuleForm, notify_rule_save, "Notification rule"),
}


@require_GET
@role_required(can_admin)
def settings_page(request: HttpRequest) -> HttpResponse:
    """List the settings of the teams you administer, model prices and spend, with history."""
    user = request.user
    teams = list(admin_teams(user))
    return page(request, "settings/index.html", {
        "policies": admin_scope(BudgetPolicy.objects.select_related("team", "updated_by"), user)
        .order_by("team__slug", "agent_name")[:200],
        "prices": sel.model_prices(),
        "prices_editable": is_installation_admin(user),
        "spend": sel.spend_by_agent(teams=team_ids_for(user, ADMIN)),
        "limits": admin_scope(ToolLimit.objects.select_related("team"), user)
        .order_by("team__slug", "tool")[:500],
        "rules": admin_scope(NotifyRule.objects, user)
        .select_related("team", "group", "escalate_to")[:500],
        "history": settings_history(teams=admin_team_slugs(user)),
        "teams": teams,
    })


@require_http_methods(["GET", "POST"])
@role_required(can_admin)
def settings_edit(request: HttpRequest, kind: str, pk: int | None = None) -> HttpResponse:
    """Create or edit a setting of a team you administer (or a price); saving audits the diff."""
    if kind not in _KINDS:
        return redirect("console:settings")
    model, form_class, save, title = _KINDS[kind]
    if model is ModelPrice:
        if not is_installation_admin(request.user):
            raise PermissionDenied("Model prices are the installation's: only its admins "
                                   "change them.")
        instance = get_object_or_404(model, pk=pk) if pk else None
        form = form_class(request.POST or None, instance=instance)
    else:
        instance = get_object_or_404(admin_scope(model.objects, request.user), pk=pk) if pk \
            else None
        form = form_class(request.POST or None, instance=instance,
                          teams=admin_teams(request.user))
    if request.method == "POST" and form.is_valid():
        save(form=form, actor=request.user)
        messages.success(request, f"{title} saved.")
        return redirect("console:settings")
    status = 422 if request.method == "POST" else 200
    return page(request, "settings/edit.html",
                {"form": form, "title": title, "kind": kind, "instance": instance},
                status=status)


def _date(raw: str) -> dt.datetime | None:
    try:
        value = dt.datetime.fromisoformat(raw) if raw else None
    except ValueError:
        return None
    return value.replace(tzinfo=dt.UTC) if value and value.tzinfo is None else value


@require_GET
@role_required()
def audit(request: HttpRequest) -> HttpResponse:
    """Show the audit log, filtered by actor, run, action and time, newest first."""
    get = request.GET
    filters = sel.AuditFilters(actor=get.get("actor", "").strip(), run=get.get("run", "").strip(),
                               action=get.get("action", "").strip(),
                               since=_date(get.get("since", "")), until=_date(get.get("until", "")))
    rows = sel.audit_list(filters=filters, teams=visible_teams(request.user),
                          before_id=int_or_none(get.get("before")))
    params: dict[str, Any] = {k: get[k] for k in ("actor", "run", "action", "since", "until")
                              if get.get(k)}
    wide = is_installation_admin(request.user)
    sink = audit_sink_status() if wide else None
    return page(request, "audit.html", {"page": rows, "f": params, "sink": sink,
                                        "team_only": not wide}, partial="rows")
