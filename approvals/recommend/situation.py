"""The explicit inputs of a recommendation, and how they are read from a real run.

``Situation`` is plain data so the decision (``decide.py``) is a pure function that property
tests can drive over every cell; ``situation_read`` fills it from the run's state, ledger and
events — never from an empty state.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from approvals.recommend.classes import FailureClass

WRITE_EFFECTS = ("idempotent", "reversible", "manual", "irreversible")


@dataclass(frozen=True)
class Evidence:
    """What is known about an ambiguous write: the probe's answer and the attempt's timing."""

    probe: str = "none"  # none | unreachable | not_found_early | different
    cause: str = ""  # timeout | worker_lost | transient (what made it ambiguous)
    elapsed_ms: int | None = None  # how long the attempt ran before it failed
    timeout_s: float | None = None  # the tool's declared timeout
    executed_before: int = 0  # this tool's earlier unknown calls people confirmed executed
    not_executed_before: int = 0  # ... and confirmed not executed
    reconfirmed: int = 0  # this call was confirmed "not executed" before and went unknown again
    # probe "different": what the call asked vs what the probe found, per identifying fact
    differs: tuple[tuple[str, str, str], ...] = ()  # (argument, asked, found) as text


@dataclass(frozen=True)
class Situation:
    """Everything the recommendation weighs, named."""

    failure: FailureClass
    status: str = "blocked"  # blocked | unknown | waiting
    tool: str = ""
    effect: str = ""  # read | idempotent | reversible | manual | irreversible | "" (no tool)
    done: int = 0
    total: int = 0
    compensable_done: int = 0  # writes made so far that a rollback can undo
    standing_writes: tuple[str, ...] = ()  # writes made so far that nothing can undo
    step_writes_done: tuple[str, ...] = ()  # writes that succeeded in the blocked step
    writes_ahead: tuple[str, ...] = ()  # "step: tool (effect)" the next steps are known to make
    operator_retries: int = 0  # times a person already retried this step
    deployed_version: str = ""  # for version_gone: the version a fork would run on
    evidence: Evidence = field(default_factory=Evidence)
    wait_until: dt.datetime | None = None
    wait_reason: str = ""

    @property
    def progress(self) -> float:
        """Return the share of planned steps done."""
        return self.done / self.total if self.total else 0.0

    @property
    def is_write(self) -> bool:
        """Return True when the failing call changes the outside world."""
        return self.effect in WRITE_EFFECTS

