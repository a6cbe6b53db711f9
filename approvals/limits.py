"""Admin changes to budget policies and tool limits from the API.

They go through the console's own forms and save service (approvals.services_settings), so
both validate the same way and write the same audit row.
"""
from __future__ import annotations

from typing import Any

from django.db import IntegrityError
from django.forms import ModelForm

from agentops.errors import Conflict, InvalidInput, NotFound
from approvals.forms import BudgetPolicyForm, ToolLimitForm
from approvals.services_settings import budget_policy_save, tool_limit_save
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
