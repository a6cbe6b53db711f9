"""REST endpoints of notification routing rules (admins) and the delivery log (viewers)."""
from __future__ import annotations

import uuid

from django.http import HttpRequest
from ninja import Path, Router, Status

from agentops import api_auth
from approvals import limits
from approvals.schemas_notify import DeliveryOut, NotifyRuleIn, NotifyRuleOut
from approvals.selectors import deliveries_for_run
from approvals.models import NotifyRule
from approvals.teams import admin_scope, admin_team_get

router = Router(tags=["notifications"])


@router.get("/rules", response=list[NotifyRuleOut], summary="List notification rules")
def list_rules(request: HttpRequest):
    """Return the rules of the teams you administer, in the order they are matched."""
    user = api_auth.admin(request)
    return list(admin_scope(NotifyRule.objects, user).select_related(
        "team", "group", "escalate_to")[:1000])


@router.post("/rules", response={201: NotifyRuleOut}, summary="Create a notification rule")
def create_rule(request: HttpRequest, body: NotifyRuleIn):
    """Create a rule; an undeclared channel or unknown group is refused (422) naming what exists."""
    user = api_auth.admin(request)
    team = admin_team_get(user=user, slug=body.team)
    rule = limits.notify_rule_save_values(actor=user, values=_values(body), team=team)
    return Status(201, limits.notify_rule_get(user=user, rule_id=rule.pk))


@router.put("/rules/{rule_id}", response=NotifyRuleOut, summary="Replace a notification rule")
def update_rule(request: HttpRequest, body: NotifyRuleIn,
                rule_id: int = Path(..., ge=1, le=2**62)):
    """Replace every field of a rule (another team's: 404); the change is audited."""
    user = api_auth.admin(request)
    team = admin_team_get(user=user, slug=body.team) if body.team else None
    limits.notify_rule_save_values(actor=user, values=_values(body), team=team,
                                   rule_id=rule_id)
    return limits.notify_rule_get(user=user, rule_id=rule_id)


@router.delete("/rules/{rule_id}", response={204: None}, summary="Delete a notification rule")
def delete_rule(request: HttpRequest, rule_id: int = Path(..., ge=1, le=2**62)):
    """Delete a rule; deliveries it already made stay in the log."""
    user = api_auth.admin(request)
    limits.notify_rule_delete(actor=user, rule_id=rule_id)
    return Status(204, None)


@router.get("/deliveries", response=list[DeliveryOut], summary="List a run's deliveries")
def list_deliveries(request: HttpRequest, run_id: uuid.UUID):
    """Return who was notified about a run, when, on which channel, with every attempt."""
    api_auth.viewer(request)
    return deliveries_for_run(run_id=run_id)


def _values(body: NotifyRuleIn) -> dict:
    values = body.model_dump(exclude={"team"})
    values["subject"] = values["subject"] or ""
    return values
