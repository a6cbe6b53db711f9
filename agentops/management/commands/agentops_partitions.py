"""manage.py agentops_partitions: list, make ahead, or drop (archiving first) event partitions."""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentops.errors import AgentOpsError
from runs.partitions import partitioned, partitions_drop, partitions_ensure, partitions_list


class Command(BaseCommand):
    """The event table's monthly partitions (PostgreSQL): list | ensure | drop."""

    help = ("list: the monthly partitions; ensure: make them from this month to "
            "AGENTOPS_EVENT_PARTITIONS_AHEAD months on; drop --older-than-days N [--archive] "
            "[--dry-run]: drop the oldest partitions whose runs all ended more than N days ago, "
            "after writing their runs to the archive store with --archive")

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="sub", required=True)
        sub.add_parser("list", help="the monthly partitions, oldest first")
        sub.add_parser("ensure", help="make the partitions of the coming months")
        drop = sub.add_parser("drop", help="drop whole partitions of long-ended runs")
        drop.add_argument("--older-than-days", type=int, required=True, metavar="N")
        drop.add_argument("--archive", action="store_true",
                          help="write each run to the archive store (checked) before the drop")
        drop.add_argument("--dry-run", action="store_true", help="say what would go; drop nothing")

    def handle(self, *args, sub: str, **options) -> None:
        if not partitioned():
            raise CommandError("the event table is not partitioned (partitions need "
                               "PostgreSQL; SQLite keeps one table: use agentops_prune)")
        if sub == "list":
            for part in partitions_list():
                self.stdout.write(f"{part.name}  {part.start} .. {part.end}")
        elif sub == "ensure":
            made = partitions_ensure()
            self.stdout.write(f"Made {len(made)} partitions: {' '.join(made) or '-'}")
        else:
            self._drop(options["older_than_days"], options["archive"], options["dry_run"])

    def _drop(self, older_than_days: int, archive: bool, dry_run: bool) -> None:
        try:
            lines = partitions_drop(older_than_days=older_than_days, archive=archive,
                                    dry_run=dry_run)
        except (AgentOpsError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        verb = "would drop" if dry_run else "dropped"
        for line in lines:
            if line["dropped"] or dry_run and not line["reason"]:
                self.stdout.write(f"{line['partition']}: {verb} "
                                  f"({line['archived']} runs archived)")
            else:
                self.stdout.write(f"kept: {line['reason']}")
        if not lines:
            self.stdout.write("No partition is due.")
