"""The evidence behind a loop or stall diagnosis: the repeated calls, or the rounds that
brought nothing new.

The engine stops a step when the model asks for the same call LOOP_REPEATS times (loop),
when STALL_ROUNDS rounds bring no new facts (stall), or when the step used its turns
(turn limit, shown as a loop). The recommendation names the failure class
(``classes.failure_class``); this module reads what a person needs to agree with it from the
step's ``model.replied`` events and the ledger: each repeated call side by side (tool,
arguments, result digest, time), or each unproductive round and why it did not count.
"""
from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field
from typing import Any

from approvals.recommend.classes import FailureClass, failure_class
from ledger.models import ToolCall
from agentops.jsonstate import canonical_json
from runs.engine.core.stall import LOOP_REPEATS, STALL_ROUNDS
from runs.event_types import EventType
from runs.models import Run
from runs.models.event import run_events
from runs.statuses import BlockReason, RunStatus

WINDOW = 20  # model turns of the step read, newest first (the engine's guard window)
SHOWN = 6  # repeats shown side by side
_GUARDS = (BlockReason.LOOP_DETECTED, BlockReason.STALLED)
_KINDS = {FailureClass.LOOP: "loop", FailureClass.STALL: "stall",
          FailureClass.TURN_LIMIT: "turn_limit"}


@dataclass(frozen=True)
class CallSeen:
    """One call the model asked for, with what came back."""

    turn: int
    at: dt.datetime
    tool: str
    args: Any
    tool_call_id: str
    result: str  # "succeeded: 42 items", "failed: timeout", "not run: the loop guard stopped it"
    digest: str  # first 12 hex digits of the sha256 of its facts ("" without facts)


@dataclass(frozen=True)
class Round:
    """One model turn of the step and why it did not count as progress."""

    turn: int
    at: dt.datetime
    calls: list[CallSeen]
    verdict: str


@dataclass(frozen=True)
class GuardEvidence:
    """What a loop / stall / turn-limit stop rests on."""

    kind: str  # loop | stall | turn_limit
    step: str
    summary: str
    repeats: list[CallSeen] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)


def guard_evidence(*, run: Run) -> GuardEvidence | None:
    """Return the evidence of ``run``'s loop or stall stop (None for any other state)."""
    if run.status != RunStatus.BLOCKED or run.attention_reason not in _GUARDS:
        return None
    step = run.current_step
    failed = (run_events(run).filter(type=EventType.STEP_FAILED, data__step=step)
              .order_by("-seq").values_list("data", flat=True).first()) or {}
    kind = _KINDS.get(failure_class(str(failed.get("error_class") or "")))
    if kind is None:
        return None
    rounds = _rounds(run, step)
    if kind == "loop":
        repeats = _repeats(rounds)
        return GuardEvidence(kind, step, _loop_summary(repeats), repeats=repeats)
    shown = rounds[-STALL_ROUNDS:]  # the rounds the guard counted (a turn limit: the last ones)
    dull = sum(1 for r in shown if r.verdict != "new facts")
    said = f"{dull} of the last {len(shown)} rounds of {step} brought no new facts"
    if kind == "turn_limit":
        said = f"{step} used all its model turns; {said}"
    return GuardEvidence(kind, step, said, rounds=shown)


def _rounds(run: Run, step: str) -> list[Round]:
    replies = list(run_events(run).filter(type=EventType.MODEL_REPLIED, data__step=step)
                   .order_by("-seq").values_list("data", "at")[:WINDOW])[::-1]
    ids = [c["id"] for data, _ in replies for c in data.get("calls") or [] if c.get("id")]
    ledger = {c.tool_call_id: c for c in ToolCall.objects.filter(run=run, tool_call_id__in=ids)}
    rounds, seen = [], {}
    for data, at in replies:
        calls = [_seen(data, at, c, ledger.get(c.get("id", ""))) for c in data.get("calls") or []]
        rounds.append(Round(int(data.get("turn") or 0), at, calls, _verdict(calls, seen)))
        for c in calls:
            if c.digest:
                seen.setdefault(c.digest, int(data.get("turn") or 0))
    return rounds


def _seen(data: dict[str, Any], at: dt.datetime, call: dict[str, Any],
          row: ToolCall | None) -> CallSeen:
    result, digest = "not run: the loop guard stopped it", ""
    if row is not None:
        if row.facts is not None and row.status in ("succeeded", "confirmed_executed"):
            digest = hashlib.sha256(canonical_json(row.facts).encode()).hexdigest()[:12]
        said = row.summary or row.error or ""
        result = f"{row.status.replace('_', ' ')}: {said[:160]}" if said else \
            row.status.replace("_", " ")
    return CallSeen(int(data.get("turn") or 0), at, str(call.get("name") or ""),
                    call.get("args"), str(call.get("id") or ""), result, digest)


def _verdict(calls: list[CallSeen], seen: dict[str, int]) -> str:
    if not calls:
        return "no tool call: the reply did not finish the step"
    fresh = [c for c in calls if c.digest and c.digest not in seen]
    if fresh:
        return "new facts"
    same = sorted({seen[c.digest] for c in calls if c.digest in seen})
    if same:
        return f"same facts as turn {', '.join(str(t) for t in same)}"
    return "no facts: every call failed or was not run"


def _key(call: CallSeen) -> str:
    return canonical_json({"tool": call.tool, "args": call.args})


def _repeats(rounds: list[Round]) -> list[CallSeen]:
    calls = [c for r in rounds for c in r.calls]
    last = rounds[-1].calls if rounds else []
    counts: dict[str, int] = {}
    for c in calls:
        counts[_key(c)] = counts.get(_key(c), 0) + 1
    repeated = next((_key(c) for c in last if counts[_key(c)] >= LOOP_REPEATS), None)
    if repeated is None and counts:
        repeated = max(counts, key=lambda k: counts[k])
    return [c for c in calls if _key(c) == repeated][-SHOWN:]


def _loop_summary(repeats: list[CallSeen]) -> str:
    if not repeats:
        return "the step repeated itself"
    digests = {c.digest for c in repeats if c.digest}
    same = (" and got the same result each time" if len(digests) == 1
            else "" if not digests else f" ({len(digests)} different results)")
    return (f"{repeats[0].tool} was asked for {len(repeats)} times with the same "
            f"arguments{same}")
