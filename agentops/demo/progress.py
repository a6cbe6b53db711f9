"""What the demo's terminal says while its live runs move: one line per change a person sees.

After the banner, the launcher asks ``DemoProgress.news()`` every few seconds and prints what
changed since it last asked: another child run of the batch ended, the batch ended, a live
refund's approval request arrived in the inbox (with the page to open). The servers' own log
lines go to files under var/ (agentops.demo.launch), so these are the lines that scroll.
"""
from __future__ import annotations

from typing import Any

from django.urls import reverse
from django.utils import timezone

from approvals.models import Approval
from approvals.statuses import ApprovalStatus
from runs.models import Run
from runs.statuses import TERMINAL


class DemoProgress:
    """Remember what the live runs looked like; say what changed."""

    def __init__(self, runs: dict[str, Run], base_url: str) -> None:
        self.runs = dict(runs)
        self.base_url = base_url.rstrip("/")
        self.told: dict[str, Any] = {}

    def news(self) -> list[str]:
        """Return a line for each change since the last call (none on the first, for the
        state the banner already showed)."""
        lines = []
        for name, run in self.runs.items():
            for key, now, text in self._facts(name, run):
                if key in self.told and self.told[key] != now and text:
                    lines.append(f"{timezone.now():%H:%M:%S}  {name}: {text}")
                self.told[key] = now
        return lines

    def _facts(self, name: str, run: Run) -> list[tuple[str, Any, str]]:
        """Return (key, value, what to say when it changed) for what a person watches."""
        if run.agent_name == "document-batch":
            ended = Run.objects.filter(parent=run, status__in=TERMINAL).count()
            docs, size = run.input.get("documents", 0), max(run.input.get("batch_size", 1), 1)
            total = -(-docs // size)  # every child, those of waves not started yet too
            status = Run.objects.filter(pk=run.pk).values_list("status", flat=True).first()
            return [(f"{name}:children", ended, f"{ended} of {total} child runs ended"),
                    (f"{name}:status", status, f"the batch {status}" if status in TERMINAL
                     else "")]
        pending = (Approval.objects.filter(run=run, status=ApprovalStatus.PENDING)
                   .values_list("pk", flat=True).first())
        inbox = f"{self.base_url}{reverse('console:inbox')}?focus={pending}"
        return [(f"{name}:approval", pending,
                 f"its refund approval is waiting in the inbox: {inbox}" if pending else "")]
