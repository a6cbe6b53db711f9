"""Re-seal every sealed tool argument with the newest seal key (``agentops rotate-keys``)."""
from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from ledger.errors import SealedUnreadable
from ledger.models import ToolCall
from ledger.sealed import reseal

_BATCH = 500


@dataclass
class RotationReport:
    """How many sealed values were re-sealed, and which could not be opened."""

    resealed: int = 0
    unreadable: list[str] = field(default_factory=list)

    def line(self) -> str:
        """Return the report as one line."""
        text = f"re-sealed {self.resealed} tool call(s) with the newest seal key"
        if self.unreadable:
            text += (f"; {len(self.unreadable)} cannot be opened with any key (kept as they "
                     f"are): {', '.join(self.unreadable[:10])}")
        return text


def sealed_rotate() -> RotationReport:
    """Re-seal every ToolCall.sealed_args with the newest key, in short batches."""
    report, last = RotationReport(), 0
    while True:
        batch = list(ToolCall.objects.filter(pk__gt=last).exclude(sealed_args="")
                     .order_by("pk").values_list("pk", "tool_call_id", "sealed_args")[:_BATCH])
        if not batch:
            return report
        last = batch[-1][0]
        with transaction.atomic():
            for pk, call_id, token in batch:
                try:
                    fresh = reseal(token)
                except SealedUnreadable:
                    report.unreadable.append(call_id)
                    continue
                # Only if unchanged since the read: a concurrent edit keeps its own sealing.
                report.resealed += ToolCall.objects.filter(pk=pk, sealed_args=token).update(
                    sealed_args=fresh)
