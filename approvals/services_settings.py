"""Save admin settings (budget policies, tool limits, rules) and audit the diff (with the team)."""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.forms import ModelForm

from approvals.audit import audit_record
from runs.engine.runtime.prices import prices_forget


def _jsonable(value: Any) -> Any:
    return value if value is None or isinstance(value, (int, float, str, bool)) else str(value)


def _diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    return {k: [_jsonable(before.get(k)), _jsonable(v)]
            for k, v in after.items() if before.get(k) != v}


def _settings_save(*, form: ModelForm, actor: Any, action: str, label: str) -> Any:
    fields = list(form.Meta.fields)
    instance = form.instance
    creating = instance.pk is None
    before = {} if creating else dict(
        type(instance).objects.filter(pk=instance.pk).values(*fields).first() or {})
    with transaction.atomic():
        obj = form.save(commit=False)
        if hasattr(obj, "updated_by_id"):
            obj.updated_by = actor
        obj.save()
        after = {f: getattr(obj, "team_id" if f == "team" else f) for f in fields}
        changes = _diff(before, after)
        team = {"team": obj.team.slug} if hasattr(obj, "team_id") else {}
        audit_record(actor=actor, action=action,
                     data={"target": getattr(obj, label) or "(every agent)", **team,
                           "created": creating, "changes": changes})
    return obj


def budget_policy_save(*, form: ModelForm, actor: Any) -> Any:
    """Save a valid BudgetPolicyForm and audit it as ``settings.budget_policy``."""
    return _settings_save(form=form, actor=actor, action="settings.budget_policy",
                          label="agent_name")


def model_price_save(*, form: ModelForm, actor: Any) -> Any:
    """Save a valid ModelPriceForm, audit it as ``settings.model_price``; workers see it soon."""
    obj = _settings_save(form=form, actor=actor, action="settings.model_price", label="model")
    prices_forget()  # this process at once; workers' caches expire within seconds
    return obj


def tool_limit_save(*, form: ModelForm, actor: Any) -> Any:
    """Save a valid ToolLimitForm and audit it as ``settings.tool_limit``."""
    return _settings_save(form=form, actor=actor, action="settings.tool_limit", label="tool")


def notify_rule_save(*, form: ModelForm, actor: Any) -> Any:
    """Save a valid NotifyRuleForm and audit it as ``settings.notify_rule``."""
    return _settings_save(form=form, actor=actor, action="settings.notify_rule", label="name")
