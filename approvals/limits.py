"""Admin changes to budget policies, tool limits and notification rules from the API.

They go through the console's own forms and save service (approvals.services_settings), so
both validate the same way and write the same audit row.
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
from ledger.models import ToolLimit
from runs.models import BudgetPolicy


class PolicyNotFound(NotFound):
    """No budget policy with that id."""

    code = "budget_policy_not_found"


class PolicyExists(Conflict):
    """A policy for that agent exists already; update it instead."""

    code = "budget_policy_exists"


def _form(form_class: type[ModelForm], instance: Any, values: dict[str, Any]) -> ModelForm:
    fields = form_class.Meta.fields
    data = {f: getattr(instance, f) for f in fields}
    data.update({k: v for k, v in values.items() if k in fields})
    form = form_class(data={k: "" if v is None else v for k, v in data.items()},
                      instance=instance)
    if not form.is_valid():
        errors = {k: [str(m) for m in v] for k, v in form.errors.items()}
        raise InvalidInput("the values are not acceptable", errors=errors)
    return form


def budget_policy_get(*, policy_id: int) -> BudgetPolicy:
    """Return a budget policy or raise PolicyNotFound."""
    policy = BudgetPolicy.objects.filter(pk=policy_id).first()
    if policy is None:
        raise PolicyNotFound(f"no budget policy {policy_id}", policy_id=policy_id)
    return policy


def budget_policy_create(*, actor: Any, agent_name: str, values: dict[str, Any]) -> BudgetPolicy:
    """Create the policy of ``agent_name`` ("" = global); raise PolicyExists when it exists."""
    exists = PolicyExists(f"a budget policy for {agent_name or '(global)'} exists; update it",
                          agent_name=agent_name)
    if BudgetPolicy.objects.filter(agent_name=agent_name).exists():
        raise exists
    values = {k: v for k, v in values.items() if v is not None}
    form = _form(BudgetPolicyForm, BudgetPolicy(agent_name=agent_name), values)
    try:
        return budget_policy_save(form=form, actor=actor)
    except IntegrityError:
        raise exists from None  # created by someone else between the check and the insert


def budget_policy_update(*, actor: Any, policy_id: int, values: dict[str, Any]) -> BudgetPolicy:
    """Set the given fields of a policy (None = no limit) and audit the change."""
    policy = budget_policy_get(policy_id=policy_id)
    values.pop("agent_name", None)
    return budget_policy_save(form=_form(BudgetPolicyForm, policy, values), actor=actor)


def tool_limit_set(*, actor: Any, tool: str, values: dict[str, Any]) -> ToolLimit:
    """Create or change the limits of ``tool`` and audit the change."""
    limit = ToolLimit.objects.filter(tool=tool).first() or ToolLimit(tool=tool)
    values.pop("tool", None)
    try:
        return tool_limit_save(form=_form(ToolLimitForm, limit, values), actor=actor)
    except IntegrityError:
        raise Conflict(f"the limits of {tool} were created meanwhile; try again",
                       tool=tool) from None


def notify_rule_save_values(*, actor: Any, values: dict[str, Any],
                            rule_id: int | None = None) -> NotifyRule:
    """Create (or change, with ``rule_id``) a routing rule from API values and audit it.

    Groups are given by name; an unknown one, like an undeclared channel, is refused naming
    what exists.
    """
    rule = NotifyRule() if rule_id is None else notify_rule_get(rule_id=rule_id)
    values = dict(values)
    for field in ("group", "escalate_to"):
        if field in values:
            values[field] = _group_pk(field, values[field])
    return notify_rule_save(form=_form(NotifyRuleForm, rule, values), actor=actor)


def notify_rule_get(*, rule_id: int) -> NotifyRule:
    """Return a routing rule or raise NotFound (404)."""
    rule = NotifyRule.objects.filter(pk=rule_id).select_related("group", "escalate_to").first()
    if rule is None:
        raise NotFound(f"no notification rule {rule_id}", rule_id=rule_id)
    return rule


def notify_rule_delete(*, actor: Any, rule_id: int) -> None:
    """Delete a routing rule (its past deliveries stay) and audit it."""
    rule = notify_rule_get(rule_id=rule_id)
    with transaction.atomic():
        rule.delete()
        audit_record(actor=actor, action="settings.notify_rule",
                     data={"target": rule.name, "deleted": True, "changes": {}})


def _group_pk(field: str, name: Any) -> int | None:
    if name in (None, ""):
        return None
    pk = Group.objects.filter(name=name).values_list("pk", flat=True).first()
    if pk is None:
        known = ", ".join(Group.objects.order_by("name").values_list("name", flat=True)[:50])
        raise InvalidNotifyRule(f"no group {name!r}", errors={field: [
            f"No group {name!r}; groups: {known or 'none'}."]})
    return pk
