"""What an operator action does to the world: one model, read by every surface that says so.

For each action, each call it touches is in one *situation* (``open``: it did not happen and
may run; ``unknown``: it may have happened; ``done``: it happened; ``undone``: a rollback
reversed it). The action's row in ``FATES`` says what the action does to a call in each
situation (run it again, cancel it, undo it, leave it standing...), and ``consequence``
turns that fate and the tool's declaration (``Traits``: a key, a probe, a compensation) into
what happens in the world: whether the tool is called again, with which key, whether an
effect may happen a second time, which compensation runs and which effects stand.

The action previews (approvals/actions/*), the confirm dialog, bulk, the API's
``preview: true``, the recommendation's wording and docs/triage.md's table
(``effect_table``) are all derived from here. Pure: no database, no I/O.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# The effect classes of issue 31, in the order the docs' table shows them.
KINDS = ("read", "idempotent", "probeable", "reversible", "irreversible")
KIND_WORDS = {"read": "read", "idempotent": "idempotent write (keyed)",
              "probeable": "probeable write", "reversible": "reversible write (compensation)",
              "irreversible": "irreversible write (no key, probe or compensation)"}

# What an action does to a call, by the call's situation.
RERUN, CANCEL, STAND, COMPENSATE, TICK, RECORD, REDO, REPEAT = (
    "rerun", "cancel", "stand", "compensate", "tick", "record", "redo", "repeat")
THENS = ("hold", "terminate", "resume")  # what a rollback does once it restored the run


@dataclass(frozen=True)
class Traits:
    """What a tool's declaration promises about repeating and undoing its effect."""

    tool: str
    write: bool
    keyed: bool = False  # honours ctx.idempotency_key: a repeat is deduplicated
    probeable: bool = False  # can ask the world whether it ran
    compensable: bool = False  # has a compensation: a rollback undoes it

    @property
    def kind(self) -> str:
        """Return the effect class (read / idempotent / probeable / reversible / irreversible)."""
        if not self.write:
            return "read"
        if self.keyed:
            return "idempotent"
        if self.probeable:
            return "probeable"
        return "reversible" if self.compensable else "irreversible"


@dataclass(frozen=True)
class Consequence:
    """What one action does to one call, in the world."""

    fate: str
    will: str  # the sentence a person reads
    calls_tool: bool = False  # the tool's function is called again
    key: str = ""  # "same" | "new" | "undo" | "" (no key is used)
    may_repeat: bool = False  # an effect that already happened may happen a second time
    stands: bool = False  # an effect that happened stays in the world
    undone: bool = False  # a compensation reverses the effect

    def as_dict(self) -> dict[str, Any]:
        """Return the JSON form a preview line carries."""
        return asdict(self)


# The one declaration: what each action does to a call in each situation.
FATES: dict[str, dict[str, str]] = {
    "retry": {"open": RERUN, "done": STAND, "undone": REDO},
    "resume": {"open": RERUN, "done": STAND, "undone": REDO},
    "wake": {"open": RERUN, "done": STAND},
    "confirm_not_executed": {"unknown": RERUN, "done": STAND},
    "confirm_executed": {"unknown": RECORD, "done": STAND},
    "skip": {"open": CANCEL, "done": STAND},
    "terminate": {"open": CANCEL, "unknown": STAND, "done": STAND},
    "rollback": {"open": CANCEL, "unknown": TICK, "done": COMPENSATE},
    "rollback_terminate": {"open": CANCEL, "unknown": TICK, "done": COMPENSATE},
    "edit_plan": {"open": CANCEL, "done": STAND},
    # A restart is a new run with its own keys: what this run made, it makes again.
    "restart": {"unknown": REPEAT, "done": REPEAT, "undone": REDO},
}


def doing(tool: str) -> str:
    """Return what the tool does, as a support person says it ("send the customer email")."""
    words = [w for w in tool.lower().replace("-", "_").split("_") if w]
    if not words:
        return "make its effect"
    if len(words) == 1:
        return {"email": "send the email", "refund": "issue the refund",
                "pay": "make the payment", "charge": "charge the card",
                "ship": "ship the order"}.get(words[0], f"do {words[0]}")
    return f"{words[0]} the {' '.join(words[1:])}"


def consequence(action: str, situation: str, traits: Traits, *, then: str = "") -> Consequence:
    """Return what ``action`` does to a call in ``situation`` whose tool has ``traits``."""
    fate = FATES.get(action, {}).get(situation, "")
    if action == "rollback_terminate":
        then = "terminate"
    return _BY_FATE[fate](traits, situation, then or "hold") if fate else \
        Consequence("", "not touched", stands=situation == "done" and traits.write)


def _rerun(t: Traits, situation: str, then: str) -> Consequence:
    if not t.write:
        return Consequence(RERUN, "runs again",
                           calls_tool=True)
    if t.keyed:
        return Consequence(RERUN, "runs again with the same idempotency key: if it already "
                           "happened, the tool does not do it twice", calls_tool=True,
                           key="same")
    if situation == "unknown":
        probe = (" (it has a probe, but you say it did not happen, so it is not asked again)"
                 if t.probeable else "")
        return Consequence(RERUN, f"runs again with no idempotency key{probe}: if it did "
                           f"happen, this may {doing(t.tool)} a second time", calls_tool=True,
                           may_repeat=True)
    return Consequence(RERUN, "runs again (its last attempt did not take effect); it has no "
                       "idempotency key", calls_tool=True)


def _cancel(t: Traits, situation: str, then: str) -> Consequence:
    return Consequence(CANCEL, "cancelled, never runs")


def _stand(t: Traits, situation: str, then: str) -> Consequence:
    if not t.write:
        return Consequence(STAND, "stays as it is (a read)")
    if situation == "unknown":
        return Consequence(STAND, "stays as it is: nobody knows whether it happened; if it "
                           "did, it stays done", stands=True)
    if t.compensable:
        return Consequence(STAND, "stays done (Roll back can undo it)", stands=True)
    return Consequence(STAND, "this stays done whatever you press (nothing can undo it)",
                       stands=True)


_AFTER = {"hold": "; then the run waits for a person at the checkpoint",
          "terminate": "; then the run ends (cancelled)",
          "resume": "; then the run goes on from the checkpoint and may make it again, with a "
                    "new key"}


def _compensate(t: Traits, situation: str, then: str) -> Consequence:
    if not t.write:
        return Consequence(COMPENSATE, "nothing to undo (a read)")
    if not t.compensable:
        return _tick(t, situation, then)
    return Consequence(COMPENSATE, "undone by its compensation" + _AFTER[then],
                       calls_tool=False, key="undo", undone=True)


def _tick(t: Traits, situation: str, then: str) -> Consequence:
    if not t.write:
        return Consequence(TICK, "nothing to undo (a read)")
    if situation == "unknown":
        return Consequence(TICK, "tick: it may have happened and nothing can undo it by code; "
                           "check it and handle it by hand", stands=True)
    return Consequence(TICK, "tick: nothing can undo it by code, so this write stays done; "
                       "handle it by hand (if at all)", stands=True)


def _record(t: Traits, situation: str, then: str) -> Consequence:
    return Consequence(RECORD, "recorded as done; nothing runs again", stands=t.write)


def _redo(t: Traits, situation: str, then: str) -> Consequence:
    if not t.write:
        return Consequence(REDO, "may run again when its step runs again")
    return Consequence(REDO, f"was undone; the step runs again and may {doing(t.tool)} anew "
                       "(a new key)", key="new")


def _repeat(t: Traits, situation: str, then: str) -> Consequence:
    if not t.write:
        return Consequence(REPEAT, "the new run reads it again", calls_tool=True)
    undo = " (Roll back first to undo it here)" if t.compensable else ""
    if situation == "unknown":
        return Consequence(REPEAT, "may have happened in this run; the new run makes it again "
                           f"with a new key: if it did happen, this may {doing(t.tool)} a "
                           "second time", calls_tool=True, key="new", may_repeat=True,
                           stands=True)
    return Consequence(REPEAT, "happened in this run and stays done; the new run makes it "
                       f"again with a new key, so it may {doing(t.tool)} a second time{undo}",
                       calls_tool=True, key="new", may_repeat=True, stands=True)


_BY_FATE = {RERUN: _rerun, CANCEL: _cancel, STAND: _stand, COMPENSATE: _compensate,
            TICK: _tick, RECORD: _record, REDO: _redo, REPEAT: _repeat}

# Canonical declarations of each class, for the docs' table.
CANONICAL = {"read": Traits("lookup", write=False),
             "idempotent": Traits("create_label", write=True, keyed=True),
             "probeable": Traits("ship_order", write=True, probeable=True),
             "reversible": Traits("issue_refund", write=True, compensable=True),
             "irreversible": Traits("send_email", write=True)}


def effect_table(labels: dict[str, str]) -> str:
    """Return docs/triage.md's table: per action (its button), what it does to each class.

    A cell lists what the action does to a call of that class in each situation it touches
    ("done: undone by its compensation ..."); ``labels`` maps verbs to button labels.
    """
    head = ["Action", *(KIND_WORDS[k] for k in KINDS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for verb, fates in FATES.items():
        then = "hold" if verb == "rollback" else ""
        cells = ["<br>".join(f"{sit}: {consequence(verb, sit, CANONICAL[k], then=then).will}"
                             for sit in fates) for k in KINDS]
        name = labels.get(verb, verb) + (" (then: hold)" if then else "")
        lines.append("| " + " | ".join([name, *cells]) + " |")
    return "\n".join(lines)
