"""A parent waiting on its child runs: which child needs a person, and what to press there.

A batch parent waits for its children holding nothing; while one child is blocked or unknown
the parent's own panel has nothing to press. This names each such child, with the child's own
recommendation, so the operator acts there (one click to the child's page).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from approvals.recommend.advice import label_of
from runs.models import Run
from runs.statuses import REASON_LABELS, RunStatus, WaitKind

SHOWN = 5  # children named on the parent's panel; the rest are counted


@dataclass(frozen=True)
class ChildTrouble:
    """One child run that needs a person, as its parent's panel names it."""

    run_id: str
    agent: str
    status: str
    reason: str  # the child's block reason, in words
    action: str  # the child's recommended verb
    label: str  # ... its button label
    why: str


@dataclass(frozen=True)
class ChildrenAdvice:
    """What a parent waiting on children tells the operator."""

    children: tuple[ChildTrouble, ...]
    more: int  # further children in trouble, not listed

    @property
    def headline(self) -> str:
        """Return "Act on child run 1a2b3c4d: Retry step" (or on the first of several)."""
        first = self.children[0]
        many = len(self.children) + self.more
        lead = f"{many} child runs need a person; start with" if many > 1 else "Act on"
        return f"{lead} child run {first.run_id[:8]}: {first.label}"


def children_advice(*, run: Any) -> ChildrenAdvice | None:
    """Return the children a parent waiting on them should act on (None: nothing to do)."""
    if run.status != RunStatus.WAITING or run.wait_kind != WaitKind.CHILDREN:
        return None
    stuck = (Run.objects.filter(parent=run, status__in=[RunStatus.BLOCKED, RunStatus.UNKNOWN])
             .order_by("updated_at"))
    rows = list(stuck[:SHOWN + 1])
    if not rows:
        return None
    listed = tuple(_trouble(k) for k in rows[:SHOWN])
    more = stuck.count() - SHOWN if len(rows) > SHOWN else 0
    return ChildrenAdvice(listed, more)


def _trouble(kid: Run) -> ChildTrouble:
    reason = REASON_LABELS.get(kid.attention_reason, kid.attention_reason or kid.status)
    verb = kid.recommended_action or ""
    return ChildTrouble(str(kid.pk), kid.agent_name, kid.status, reason, verb,
                        label_of(verb) if verb else "decide", kid.recommendation_why
                        or kid.attention_detail)
