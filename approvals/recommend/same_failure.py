"""Other runs blocked on the same tool for the same reason: one decision for all of them.

A refused credential, a missing permission or a changed API stops every run that uses the
tool, not just this one. The panel and the API count the other runs blocked now on the same
tool with the same failure meaning (the ledger's ``error_class`` of each run's current call)
and link the bulk form with all of them and the recommended verb, so a person fixes the
cause once and decides once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.db.models import Exists, OuterRef
from django.urls import reverse

from approvals.actions import BULK_ACTIONS
from approvals.recommend.classes import failure_class
from approvals.recommend.meaning import TOOL_FAILURES
from ledger.models import ToolCall
from runs.models import Run
from runs.statuses import RunStatus

LINKED = 200  # runs put on one bulk link (the bulk form takes explicit ids)
_WORDS = {"credentials": "our credentials were refused", "permission": "permission refused",
          "not_found": "what it was asked for does not exist",
          "bad_request": "the request was refused as invalid",
          "api_changed": "its answer has a shape the adapter does not read",
          "business_rejection": "refused on business grounds"}


@dataclass(frozen=True)
class SameFailure:
    """The runs blocked like this one, and the one decision that covers them."""

    tool: str
    category: str
    others: int
    run_ids: tuple[str, ...]  # this run and the others (oldest first, at most LINKED)
    verb: str  # the bulk verb of the recommendation ("" when it has none)

    @property
    def text(self) -> str:
        """Return "14 other runs are blocked on carrier the same way (...)"."""
        runs = "1 other run is" if self.others == 1 else f"{self.others} other runs are"
        how = _WORDS.get(self.category, "it failed for good")
        return f"{runs} blocked on {self.tool} the same way ({how}): one decision for all"

    @property
    def bulk_url(self) -> str:
        """Return the bulk form with every run of the group and the recommended verb."""
        pairs = [("verb", self.verb)] if self.verb else []
        return f"{reverse('console:bulk')}?{urlencode(pairs + [('run', i) for i in self.run_ids])}"


def same_failure(*, run: Any) -> SameFailure | None:
    """Return the other runs blocked on ``run``'s tool with the same meaning (None: none)."""
    if run.status != RunStatus.BLOCKED or not run.current_tool_call:
        return None
    call = (ToolCall.objects.filter(run=run, tool_call_id=run.current_tool_call)
            .values("tool", "error_class").first())
    if call is None or failure_class(call["error_class"]) not in TOOL_FAILURES:
        return None
    like = ToolCall.objects.filter(tool_call_id=OuterRef("current_tool_call"), tool=call["tool"],
                                   error_class=call["error_class"])
    # Only the run's own team: another team's runs are never counted or linked.
    blocked = Run.objects.filter(status=RunStatus.BLOCKED, team_id=run.team_id).filter(Exists(like))
    others = blocked.exclude(pk=run.pk).count()
    if not others:
        return None
    ids = [str(run.pk), *(str(i) for i in blocked.exclude(pk=run.pk).order_by("updated_at")
                           .values_list("pk", flat=True)[:LINKED - 1])]
    verb = run.recommended_action if run.recommended_action in BULK_ACTIONS else ""
    return SameFailure(call["tool"], call["error_class"], others, tuple(ids), verb)
