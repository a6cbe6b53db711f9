"""manage.py agentops_prune: delete old history of finished runs and unreferenced artifacts."""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ledger.retention import events_prune


class Command(BaseCommand):
    """Prune events/snapshots of runs finished long ago, keeping each run's latest snapshot."""

    help = (
        "Delete events and snapshots of runs that ended more than N days ago (each run keeps "
        "its latest snapshot and the events after it), and artifacts older than N days that "
        "no tool call or attempt references. --dry-run only counts."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than-days", type=int, required=True, metavar="N")
        parser.add_argument("--dry-run", action="store_true", help="count, delete nothing")

    def handle(self, *args, older_than_days: int, dry_run: bool, **options) -> None:
        if older_than_days < 1:
            raise CommandError("--older-than-days must be at least 1")
        counts = events_prune(older_than_days=older_than_days, dry_run=dry_run)
        verb = "Would delete" if dry_run else "Deleted"
        self.stdout.write(
            f"{verb} {counts['events']} events and {counts['snapshots']} snapshots of "
            f"{counts['runs']} runs that ended before {counts['cutoff']}, and "
            f"{counts['artifacts']} unreferenced artifacts ({counts['artifact_bytes']} bytes)."
        )
