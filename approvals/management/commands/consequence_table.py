"""Print docs/triage.md's table "action → what it does to each effect class" from the model."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from approvals.actions import ACTIONS
from approvals.consequences import effect_table


class Command(BaseCommand):
    """``manage.py consequence_table``: the table, in Markdown, as docs/triage.md carries it."""

    help = __doc__

    def handle(self, *args: Any, **options: Any) -> None:
        """Write the table to stdout."""
        labels = {verb: action.label for verb, action in ACTIONS.items()}
        self.stdout.write(effect_table(labels))
