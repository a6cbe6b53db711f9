"""Console forms: settings (budget policies, tool limits), approval decisions, API keys."""
from __future__ import annotations

import json
from typing import Any

from django import forms
from django.conf import settings

from approvals.models import NotifyRule
from approvals.roles import TEAM_ROLES, VIEWER, team_ids_for
from ledger.models import ToolLimit
from runs.models import BudgetPolicy, ModelPrice, Team


class TeamOwnedForm(forms.ModelForm):
    """A form of a row that belongs to a team: ``teams`` are the ones the editor may pick."""

    def __init__(self, *args: Any, teams: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.is_bound and not self.data.get("team"):
            # Not sent: the row keeps its team; a new row goes to the editor's only team.
            keep = self.instance.team_id if self.instance.pk else (
                teams[0].pk if teams is not None and len(teams) == 1 else None)
            if keep is not None:
                self.data = self.data.copy()
                self.data["team"] = keep
        field = self.fields["team"]
        field.help_text = "The team whose runs this applies to."
        if teams is not None:
            field.queryset = teams
            if len(teams) == 1:  # no choice to make: no selector
                field.initial = teams[0].pk
                field.widget = forms.HiddenInput()


class BudgetPolicyForm(TeamOwnedForm):
    """Edit a team's budget policy; an empty agent name is the team's default policy."""

    class Meta:
        model = BudgetPolicy
        fields = ["team", "agent_name", "max_tokens", "max_model_calls", "max_tool_calls",
                  "max_cost_micros", "max_seconds", "recovery_limit", "step_retry_limit",
                  "run_failure_limit", "on_deadline"]
        help_texts = {
            "agent_name": "Blank = the team's default for every agent.",
            "max_cost_micros": "Millionths of a dollar (1000000 = $1).",
            "run_failure_limit": "Failed attempts across all of a run's steps before it "
                                 "blocks; blank = AGENTOPS_RUN_FAILURE_LIMIT.",
        }

    def clean(self) -> dict[str, Any]:
        """Reject limits of zero or below: blank means no limit."""
        data = super().clean()
        for name in ("max_tokens", "max_model_calls", "max_tool_calls", "max_cost_micros",
                     "max_seconds", "run_failure_limit"):
            value = data.get(name)
            if value is not None and value <= 0:
                self.add_error(name, "Must be above zero; leave blank for no limit.")
        return data


class ModelPriceForm(forms.ModelForm):
    """Edit what a model costs per million tokens; model "*" prices every other model."""

    class Meta:
        model = ModelPrice
        fields = ["model", "input_per_mtok_micros", "output_per_mtok_micros"]
        labels = {"input_per_mtok_micros": "Input (micro-dollars per million tokens)",
                  "output_per_mtok_micros": "Output (micro-dollars per million tokens)"}
        help_texts = {"model": 'The model name the provider reports, or "*" for any other.'}

    def clean(self) -> dict[str, Any]:
        """Reject negative prices."""
        data = super().clean()
        for name in ("input_per_mtok_micros", "output_per_mtok_micros"):
            value = data.get(name)
            if value is not None and value < 0:
                self.add_error(name, "Must be zero or above.")
        return data


class ToolLimitForm(TeamOwnedForm):
    """Edit a team's concurrency, rate and circuit-breaker settings of one tool."""

    class Meta:
        model = ToolLimit
        fields = ["team", "tool", "concurrency", "rate_per_minute", "breaker_threshold",
                  "breaker_cooldown_s"]
        help_texts = {"concurrency": "Blank = unlimited.", "rate_per_minute": "Blank = unlimited."}

    def clean(self) -> dict[str, Any]:
        """Reject zero limits: blank means unlimited."""
        data = super().clean()
        for name in ("concurrency", "rate_per_minute", "breaker_threshold"):
            value = data.get(name)
            if value is not None and value <= 0:
                self.add_error(name, "Must be above zero.")
        return data


REASON_MAX = 2000


def reason_error(form: forms.Form, purpose: str = "") -> str:
    """Return what is wrong with ``form``'s reason: missing, or longer than the limit."""
    if form.has_error("reason", "max_length"):
        length = len(form.data.get("reason", "").strip())
        return (f"The reason is {length:,} characters; the limit is {REASON_MAX:,}. "
                "Shorten it and confirm again (nothing was done).")
    return f"A reason is required{' ' + purpose if purpose else ''}."


class NotifyRuleForm(TeamOwnedForm):
    """Edit a team's routing rule: what it matches, which group and channel, its SLA."""

    class Meta:
        model = NotifyRule
        fields = ["team", "name", "order", "enabled", "subject", "agent", "tool", "risk",
                  "failure_class", "group", "channel", "sla_s", "escalate_to"]
        help_texts = {"sla_s": "Seconds until a reminder, then as many until the escalation; "
                               "0 = neither.",
                      "order": "The first matching rule (lowest order) assigns the approval "
                               "to its group."}

    def clean(self) -> dict[str, Any]:
        """Refuse an undeclared channel, an email rule without a group, an SLA-less escalation."""
        data = super().clean()
        declared = settings.AGENTOPS_NOTIFY_CHANNELS
        channel = data.get("channel", "")
        if channel and channel not in declared:
            names = ", ".join(sorted(declared)) or "none (set AGENTOPS_NOTIFY_CHANNELS)"
            self.add_error("channel", f"Channel {channel!r} is not declared; declared: {names}.")
        elif channel and declared[channel]["kind"] == "email" and not data.get("group"):
            self.add_error("group", "An email channel reaches a group's members: pick a group.")
        if data.get("escalate_to") and not data.get("sla_s"):
            self.add_error("sla_s", "Escalation happens when the SLA passes: set the SLA.")
        return data


class ReasonForm(forms.Form):
    """A reason for an operator action; ``seen_seq`` detects changes made meanwhile."""

    reason = forms.CharField(max_length=REASON_MAX, strip=True)
    seen_seq = forms.IntegerField(required=False)


class RejectForm(forms.Form):
    """Reject an approval: a reason is required and is shown to the agent."""

    reason = forms.CharField(max_length=REASON_MAX, strip=True)


class EditArgsForm(forms.Form):
    """Approve with edited arguments: a JSON object."""

    args = forms.CharField(widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}))
    reason = forms.CharField(max_length=REASON_MAX, required=False, strip=True)

    def clean_args(self) -> dict[str, Any]:
        """Parse the arguments; they must be a JSON object."""
        try:
            value = json.loads(self.cleaned_data["args"])
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc.msg} (line {exc.lineno})") from exc
        if not isinstance(value, dict):
            raise forms.ValidationError("Arguments must be a JSON object.")
        return value


def args_diff(proposed: dict[str, Any], edited: dict[str, Any]) -> list[dict[str, Any]]:
    """Return per-key changes between proposed and edited arguments."""
    rows = []
    for key in sorted(set(proposed) | set(edited)):
        before, after = proposed.get(key, None), edited.get(key, None)
        if key not in edited:
            rows.append({"key": key, "kind": "removed", "before": before, "after": None})
        elif key not in proposed:
            rows.append({"key": key, "kind": "added", "before": None, "after": after})
        elif before != after:
            rows.append({"key": key, "kind": "changed", "before": before, "after": after})
    return rows


class ApiKeyForm(forms.Form):
    """A new API key: its name, team, role and how long it lives."""

    name = forms.CharField(max_length=100, strip=True)
    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None)
    role = forms.ChoiceField(choices=[(r, r) for r in TEAM_ROLES], initial=VIEWER,
                             help_text="never above your own role in that team")
    expires_days = forms.IntegerField(required=False, min_value=1, max_value=3650,
                                      label="Expires after (days)",
                                      help_text="empty: the key never expires")

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        ids = team_ids_for(user)
        teams = Team.objects.order_by("slug")
        self.fields["team"].queryset = teams = teams if ids is None else teams.filter(pk__in=ids)
        if teams.count() > 1:  # no team picked for someone with several: they choose
            self.fields["team"].empty_label = "choose a team"


class RotateForm(forms.Form):
    """How long the old secret of a rotated key keeps working."""

    grace_s = forms.TypedChoiceField(coerce=int, initial=0, choices=[
        (0, "stops now"), (3600, "works 1 more hour"), (86400, "works 1 more day")])
