"""What operators chose the last times a run stopped like this one, and how those runs ended.

Evidence beside the recommendation: "of the last 12 runs blocked like this, retry was pressed
on 11 (10 then finished)". A failure's signature is its meaning and tool
(``credentials:create_label``, ``budget:``); every operator action pressed on a stuck run
records the run's signature on its audit row (``Intervention.signature``, indexed with
``at``), so the selector reads the last ``LAST`` rows of one signature by that index and
each run's status now — never a scan of the audit table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from approvals.models import Intervention
from approvals.recommend.classes import FailureClass, failure_class
from ledger.models import ToolCall
from runs.statuses import RunStatus, is_stuck

LAST = 20  # audit rows of the same signature read (the newest first)
FINISHED = (RunStatus.SUCCEEDED, RunStatus.COMPLETED_WITH_EXCEPTIONS)


@dataclass(frozen=True)
class Choice:
    """One action operators pressed on runs stopped like this, and how many then finished."""

    action: str  # dotted audit name, "run.retry"
    verb: str  # "retry"
    runs: int
    finished: int  # of those runs, how many ended succeeded or completed with exceptions


@dataclass(frozen=True)
class Precedent:
    """The last choices made for one failure signature."""

    signature: str
    runs: int
    choices: tuple[Choice, ...]  # most pressed first

    @property
    def text(self) -> str:
        """Return "Of the last 12 runs blocked like this, retry was pressed on 11 (10 then
        finished), skip on 1 (0 then finished)"."""
        parts = [f"{c.verb.replace('_', ' ')} {'was pressed ' if i == 0 else ''}on "
                 f"{c.runs} ({c.finished} then finished)" for i, c in enumerate(self.choices)]
        runs = "run" if self.runs == 1 else f"{self.runs} runs"
        return f"Of the last {runs} stopped like this, {', '.join(parts)}"


def failure_signature(*, run: Any) -> str:
    """Return ``meaning:tool`` of why ``run`` is stuck now ("" when it is not stuck)."""
    if not is_stuck(run.status):
        return ""
    call = None
    if run.current_tool_call:
        call = (ToolCall.objects.filter(run=run, tool_call_id=run.current_tool_call)
                .values("tool", "error_class").first())
    tool = call["tool"] if call else ""
    if run.status == RunStatus.UNKNOWN:
        meaning = FailureClass.AMBIGUOUS_WRITE.value
    elif call and call["error_class"]:
        meaning = failure_class(call["error_class"]).value
    else:
        meaning = run.attention_reason or "blocked"
    return f"{meaning}:{tool}"[:120]


def precedent_read(*, run: Any) -> Precedent | None:
    """Return the last choices operators made on other runs stopped like ``run`` (None: none)."""
    signature = failure_signature(run=run)
    if not signature:
        return None
    # Precedent from the run's own team only (another team's choices are not shown).
    rows = (Intervention.objects.filter(signature=signature, run__team_id=run.team_id)
            .exclude(run_id=run.pk)
            .order_by("-at", "-id").values_list("run_id", "action", "run__status")[:LAST])
    latest: dict[Any, tuple[str, str]] = {}
    for run_id, action, status in rows:
        latest.setdefault(run_id, (action, status))  # a run's last press is its choice
    if not latest:
        return None
    tally: dict[str, list[int]] = {}
    for action, status in latest.values():
        counts = tally.setdefault(action, [0, 0])
        counts[0] += 1
        counts[1] += status in FINISHED
    choices = sorted((Choice(a, a.split(".")[-1], n, f) for a, (n, f) in tally.items()),
                     key=lambda c: (-c.runs, c.verb))
    return Precedent(signature, len(latest), tuple(choices))
