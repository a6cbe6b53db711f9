"""The operator action: one declaration per verb, read by every surface that offers it.

An action is one verb (retry, approve, ...) and everything known about it: ``label`` and
``help`` (the console's button and dialog), ``statuses`` (the run statuses it applies to,
the same tuple its service checks), ``roles``, ``params`` (a pydantic schema: the API body,
OpenAPI, the dialog's fields) and ``bulk`` (offered on the queue's bulk form). ``check``
raises NotAllowed (wrong role) or ActionNotApplicable (wrong state) and changes nothing;
``execute`` checks first, calls one service, and writes an Intervention with the actor, the
dotted action name and what the service changed. ``preview`` says, before it runs, which
tool calls the action will cause to run again and their effect class. An action that cannot
be undone sets ``confirm_word``: ``execute`` then refuses (ConfirmationRequired, 422) unless
the person typed that word or the amount it moves (``confirmation``), on every surface.
"""
from __future__ import annotations

import uuid
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, ClassVar

from django.db import transaction

from agentops.causes import ACTION, event_cause
from agentops.errors import InvalidInput
from approvals.actions.params import ActionParams, NoParams
from approvals.confirmation import Typed
from approvals.consequences import Traits, consequence
from approvals.errors import ActionNotApplicable, NotAllowed
from approvals.models import Intervention
from approvals.recommend.precedent import failure_signature
from approvals.roles import ADMIN, OPERATOR, SUPPORT, has_role
from ledger.models import ToolCall
from ledger.statuses import DONE_OK
from ledger.statuses import ToolCallStatus as TC
from runs.live import action_phrase, live_publish
from runs.models import Run
from runs.services_operator import rules

_ROLE_WORDS = {OPERATOR: "operator", SUPPORT: "support", ADMIN: "admin"}
RUNNABLE_AGAIN = (TC.PENDING, TC.FAILED, TC.TIMED_OUT, TC.CONFIRMED_NOT_EXECUTED)


class Action:
    """One verb a person can apply; subclasses set the class attributes and ``perform``."""

    name: ClassVar[str] = ""  # dotted audit name, e.g. "run.retry"
    verb: ClassVar[str] = ""  # what the console, bulk and the API call it, e.g. "retry"
    label: ClassVar[str] = ""  # the button ("Retry step")
    help: ClassVar[str] = ""  # one or two sentences in the dialog: what happens if pressed
    target: ClassVar[str] = "run"  # what it acts on: "run" or "approval"
    roles: ClassVar[tuple[str, ...]] = (OPERATOR,)
    statuses: ClassVar[tuple[str, ...]] = ()  # run statuses it applies to (its service's)
    params: ClassVar[type[ActionParams]] = NoParams
    bulk: ClassVar[bool] = False  # offered on many runs at once (needs no parameters)
    danger: ClassVar[bool] = False  # shown as a destructive button
    during_rollback: ClassVar[bool] = False  # may act while a rollback holds the run
    reason_required: ClassVar[bool] = True
    confirm_word: ClassVar[str] = ""  # cannot be undone: a person types this word to confirm
    atomic: ClassVar[bool] = True  # False when the service commits in steps (outside world)

    def check(self, user: Any, target: Any) -> None:
        """Raise NotAllowed or ActionNotApplicable unless ``user`` may do this to ``target``."""
        # The role counts in the run's team only (an installation-wide role holds in all).
        if not has_role(user, *self.roles, team=self.run_of(target).team_id):
            needed = " or ".join(_ROLE_WORDS.get(r, r) for r in self.roles)
            raise NotAllowed(f"{self.verb.replace('_', ' ')} needs the {needed} role in the "
                             "run's team; nothing was changed")
        self.applies(target)

    def refusal(self, user: Any, target: Any) -> str:
        """Return why ``check`` refuses (role or state), or "" when the user may press it."""
        try:
            self.check(user, target)
        except (NotAllowed, ActionNotApplicable) as exc:
            return exc.message
        return ""

    def applies(self, target: Any) -> None:
        """Raise ActionNotApplicable unless the action fits the target's current state.

        Uses the very predicates the service checks under its lock (runs.services_operator
        .rules), so what the console offers is what the service accepts.
        """
        run = self.run_of(target)
        refusal = rules.status_refusal(run, self.statuses, self.verb.replace("_", " "))
        if refusal:
            raise ActionNotApplicable(refusal, status=run.status)
        refusal = "" if self.during_rollback else rules.rollback_refusal(run)
        if refusal:
            raise ActionNotApplicable(refusal)

    def execute(self, user: Any, target: Any, reason: str = "", *, confirm: str = "",
                **params: Any) -> dict[str, Any]:
        """Check, perform, and record who did what and why; return what changed.

        ``confirm`` is what the person typed; an action that cannot be undone refuses
        without its word or amount (ConfirmationRequired), changing nothing. ``channel``
        (console, email_link, slack, api) is where the decision came from, for the audit.
        """
        channel = params.pop("channel", "console")
        self.check(user, target)
        reason = (reason or "").strip()
        if self.reason_required and not reason:
            raise InvalidInput(f"a reason is required to {self.verb.replace('_', ' ')}")
        bulk = params.pop("bulk", None)
        rule = self.confirmation(target, **params)
        if rule is not None:
            rule.check(confirm, action=self.verb)
        # what stopped the run, as it was when pressed (precedent evidence for later runs)
        signature = failure_signature(run=self.run_of(target))
        cause = uuid.uuid4().hex[:16]  # every event it writes names its Intervention row
        with transaction.atomic() if self.atomic else nullcontext(), \
                event_cause(f"{ACTION}:{cause}"):
            changes = self.perform(user, target, reason, **params)
            self.audit(user, target, reason, {**changes, "channel": channel}, bulk,
                       signature=signature, cause=cause)
        return changes

    def perform(self, user: Any, target: Any, reason: str, **params: Any) -> dict[str, Any]:
        """Call the one service this action stands for; return a JSON summary of changes."""
        raise NotImplementedError

    def preview(self, target: Any, **params: Any) -> list[dict[str, Any]]:
        """Return the tool calls this action will cause to run (or undo), with effect class."""
        return []

    def diff(self, target: Any, **params: Any) -> list[dict[str, Any]]:
        """Return what the action changes in the run's plan, step by step ([]: nothing)."""
        return []

    def form_initial(self, target: Any) -> dict[str, str]:
        """Return the dialog's starting text per field (beyond a field's ``initial``)."""
        return {}

    def form_hint(self, target: Any) -> str:
        """Return one line the dialog shows beside the fields ("" for none)."""
        return ""

    def confirmation(self, target: Any, **params: Any) -> Typed | None:
        """Return what a person must type before this runs (None: a click is enough).

        ``target`` None asks for many runs at once (bulk): only the word confirms then.
        """
        if not self.confirm_word:
            return None
        amount = self.confirm_amount(target, **params) if target is not None else ""
        return Typed(self.confirm_word, amount, subject=self.label, doing=self.label.lower())

    def confirm_amount(self, target: Any, **params: Any) -> str:
        """Return the amount that also confirms (money the action moves or undoes), or ""."""
        return ""

    def run_of(self, target: Any) -> Run:
        """Return the run the action touches."""
        return target

    def audit(self, user: Any, target: Any, reason: str, changes: dict[str, Any],
              bulk: str | None, *, signature: str = "", cause: str = "") -> Intervention:
        """Write the Intervention row of this action (``cause``: the events' ``action:`` id)."""
        data = dict(changes)
        if bulk:
            data["bulk"] = bulk
        if cause:
            data["cause"] = cause
        row = Intervention.objects.create(
            run=self.run_of(target), actor=user if getattr(user, "pk", None) else None,
            actor_name=user.get_username() if user is not None else "system",
            action=self.name, reason=reason, data=data, signature=signature)
        if row.run_id is not None:
            live_publish(row.run_id, "run.changed", {
                "actor": row.actor_name, "action": row.action,
                "text": action_phrase(row.action, row.actor_name)},
                team_id=self.run_of(target).team_id)
        return row


def call_preview(call: ToolCall, will: str) -> dict[str, Any]:
    """Return one line of a preview: the call, its effect class and what will happen to it."""
    return {"tool_call_id": call.tool_call_id, "tool": call.tool, "step": call.step_key,
            "status": call.status, "effect_class": call.effect_class, "will": will}


def call_traits(call: ToolCall) -> Traits:
    """Return what the call's tool declared about repeating and undoing (as recorded)."""
    write = call.effect == "write"
    return Traits(call.tool, write=write, keyed=write and call.idempotent,
                  probeable=write and call.probeable,
                  compensable=write and call.reversibility == "reversible")


def call_situation(call: ToolCall) -> str:
    """Return open / unknown / done / undone: what the world knows of the call."""
    if call.status in DONE_OK:
        return "done"
    if call.status in (TC.UNKNOWN, TC.RUNNING):
        return "unknown"
    return "undone" if call.status == TC.COMPENSATED else "open"


def consequence_line(call: ToolCall, verb: str, *, then: str = "",
                     situation: str = "") -> dict[str, Any]:
    """Return one preview line derived from the one model (approvals.consequences)."""
    what = consequence(verb, situation or call_situation(call), call_traits(call), then=then)
    return {**call_preview(call, what.will), "kind": call_traits(call).kind,
            "key": call.idempotency_key if what.key == "same" else what.key,
            "consequence": what.as_dict()}


def standing_writes(run: Run, verb: str) -> list[dict[str, Any]]:
    """Return a line for each write of ``run`` that happened and stays whatever ``verb`` does."""
    calls = ToolCall.objects.filter(run=run, effect="write",
                                    status__in=[*DONE_OK]).order_by("id")
    return [consequence_line(c, verb) for c in calls]


def may_repeat(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the lines whose effect may happen a second time (typed confirmation needed)."""
    return [line for line in lines if (line.get("consequence") or {}).get("may_repeat")]


def step_calls(run: Run, statuses: tuple[str, ...] = RUNNABLE_AGAIN) -> list[ToolCall]:
    """Return the current step's calls in ``statuses`` (what a requeue will run)."""
    return list(ToolCall.objects.filter(run=run, step_key=run.current_step, status__in=statuses)
                .order_by("id"))


@dataclass
class Bound:
    """An action bound to a user, a target and parameters (what the console holds)."""

    action: Action
    user: Any
    target: Any
    reason: str = ""
    params: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """Raise a PermissionDenied (NotAllowed) when the button must not be offered."""
        try:
            self.action.check(self.user, self.target)
        except ActionNotApplicable as exc:
            raise NotAllowed(exc.message) from exc

    def execute(self) -> dict[str, Any]:
        """Run the action (check, service, audit)."""
        return self.action.execute(self.user, self.target, self.reason, **self.params)

    def preview(self) -> list[dict[str, Any]]:
        """Return what the action will cause to run again."""
        return self.action.preview(self.target, **self.params)


def bind(action: Action, *, user: Any, run: Any = None, approval: Any = None,
         reason: str = "", **params: Any) -> Bound:
    """Return ``action`` bound for the console (``run`` or ``approval`` is the target)."""
    params.pop("verb", None)
    return Bound(action, user, approval if approval is not None else run, reason or "", params)
