"""Admin changes to budget policies, tool limits and notification rules from the API.

They go through the console's own forms and save service (approvals.services_settings), so
both validate the same way and write the same audit row. Every row belongs to a team: a
team admin reads and writes only their teams' rows (another team's id is 404).
"""
from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.forms import ModelForm

from agentops.errors import Conflict, InvalidInput, NotFound
from approvals.audit import audit_record
from approvals.errors import InvalidNotifyRule
from approvals.forms import BudgetPolicyForm, NotifyRuleForm, ToolLimitForm
from approvals.models import NotifyRule
from approvals.services_settings import budget_policy_save, notify_rule_save, tool_limit_save
from approvals.teams import admin_scope
from ledger.models import ToolLimit
from runs.models import BudgetPolicy, Team


class PolicyNotFound(NotFound):
    """No budget policy with that id."""

    code = "budget_policy_not_found"


class PolicyExists(Conflict):
    """A policy for that agent exists already; update it instead."""

    code = "budget_policy_exists"


def _form(form_class: type[ModelForm], instance: Any, values: dict[str, Any],
          team: Team) -> ModelForm:
    fields = form_class.Meta.fields
    data = {f: getattr(instance, f) for f in fields if f != "team"}
    data.update({k: v for k, v in values.items() if k in fields})
    data["team"] = team.pk
    form = form_class(data={k: "" if v is None else v for k, v in data.items()},
                      instance=instance, teams=Team.objects.filter(pk=team.pk))
    if not form.is_valid():
        errors = {k: [str(m) for m in v] for k, v in form.errors.items()}
        raise InvalidInput("the values are not acceptable", errors=errors)
    return form


def budget_policy_get(*, user: Any, policy_id: int) -> BudgetPolicy:
    """Return a budget policy of a team ``user`` administers or raise PolicyNotFound."""
    policy = admin_scope(BudgetPolicy.objects.select_related("team"), user).filter(
        pk=policy_id).first()
    if policy is None:
        raise PolicyNotFound(f"no budget policy {policy_id}", policy_id=policy_id)
    return policy


def budget_policy_create(*, actor: Any, team: Team, agent_name: str,
                         values: dict[str, Any]) -> BudgetPolicy:
    """Create ``team``'s policy of ``agent_name`` ("" = every agent); PolicyExists if it exists."""
    exists = PolicyExists(f"team {team.slug} has a budget policy for "
                          f"{agent_name or '(every agent)'}; update it",
                          agent_name=agent_name, team=team.slug)
    if BudgetPolicy.objects.filter(team=team, agent_name=agent_name).exists():
        raise exists
    values = {k: v for k, v in values.items() if v is not None}
    form = _form(BudgetPolicyForm, BudgetPolicy(agent_name=agent_name), values, team)
    try:
        return budget_policy_save(form=form, actor=actor)
    except IntegrityError:
        raise exists from None  # created by someone else between the check and the insert


def budget_policy_update(*, actor: Any, policy_id: int, values: dict[str, Any]) -> BudgetPolicy:
    """Set the given fields of a policy (None = no limit) and audit the change."""
    policy = budget_policy_get(user=actor, policy_id=policy_id)
    values.pop("agent_name", None)
    return budget_policy_save(form=_form(BudgetPolicyForm, policy, values, policy.team),
                              actor=actor)


def tool_limit_set(*, actor: Any, team: Team, tool: str, values: dict[str, Any]) -> ToolLimit:
    """Create or change ``team``'s limits of ``tool`` and audit the change."""
    limit = ToolLimit.objects.filter(team=team, tool=tool).first() or ToolLimit(tool=tool)
    values.pop("tool", None)
    try:
        return tool_limit_save(form=_form(ToolLimitForm, limit, values, team), actor=actor)
    except IntegrityError:
        raise Conflict(f"the limits of {tool} were created meanwhile; try again",
                       tool=tool) from None


def notify_rule_save_values(*, actor: Any, values: dict[str, Any], team: Team | None,
                            rule_id: int | None = None) -> NotifyRule:
    """Create (or change, with ``rule_id``) ``team``'s routing rule from API values; audit it.

    Groups are given by name; an unknown one, like an undeclared channel, is refused naming
    what exists. A changed rule stays in its team unless ``team`` moves it.
    """
    rule = NotifyRule() if rule_id is None else notify_rule_get(user=actor, rule_id=rule_id)
    values = dict(values)
    for field in ("group", "escalate_to"):
        if field in values:
            values[field] = _group_pk(field, values[field])
    return notify_rule_save(form=_form(NotifyRuleForm, rule, values, team or rule.team),
                            actor=actor)


def notify_rule_get(*, user: Any, rule_id: int) -> NotifyRule:
    """Return a routing rule of a team ``user`` administers or raise NotFound (404)."""
    rule = admin_scope(NotifyRule.objects, user).filter(pk=rule_id).select_related(
        "team", "group", "escalate_to").first()
    if rule is None:
        raise NotFound(f"no notification rule {rule_id}", rule_id=rule_id)
    return rule


def notify_rule_delete(*, actor: Any, rule_id: int) -> None:
    """Delete a routing rule (its past deliveries stay) and audit it."""
    rule = notify_rule_get(user=actor, rule_id=rule_id)
    with transaction.atomic():
        rule.delete()
        audit_record(actor=actor, action="settings.notify_rule",
                     data={"target": rule.name, "team": rule.team.slug, "deleted": True,
                           "changes": {}})


def _group_pk(field: str, name: Any) -> int | None:
    if name in (None, ""):
        return None
    pk = Group.objects.filter(name=name).values_list("pk", flat=True).first()
    if pk is None:
        known = ", ".join(Group.objects.order_by("name").values_list("name", flat=True)[:50])
        raise InvalidNotifyRule(f"no group {name!r}", errors={field: [
            f"No group {name!r}; groups: {known or 'none'}."]})
    return pk
