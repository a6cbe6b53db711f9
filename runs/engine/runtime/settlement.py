"""What settling one tool-call attempt decided: ledger fields, events, the run's next move."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from ledger.models import ToolAttempt, ToolCall
from runs.engine.runtime.events import NewEvent


@dataclass
class Settlement:
    """What one attempt changes: ledger fields, events, and the run's next move."""

    call: ToolCall
    status: str
    fields: dict[str, Any] = field(default_factory=dict)
    events: list[NewEvent] = field(default_factory=list)
    attempt: ToolAttempt | None = None
    next: str = "continue"  # continue | retry | unknown | block
    retry_at: dt.datetime | None = None
    category: str = ""
    detail: str = ""
