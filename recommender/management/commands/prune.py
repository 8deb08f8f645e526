"""`manage.py prune`: prune history past its retention now, or say what would go."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from recommender.services.operations.retention import past_retention, prune_history


class Command(BaseCommand):
    help = (
        "Delete history past its retention (VPAWEB_RETENTION_* settings) in batches of "
        "VPAWEB_RETENTION_BATCH rows, as the hourly prune task does. --dry-run only "
        "counts what would go."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        """--dry-run and --budget."""
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="count the rows past retention, delete nothing",
        )
        parser.add_argument(
            "--budget",
            type=float,
            default=None,
            help="stop after this many seconds (default VPAWEB_RETENTION_BUDGET_S)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Print one line per history: its retention and the rows that go."""
        now = timezone.now()
        if options["dry_run"]:
            self.stdout.write("dry run: nothing is deleted")
            for pending in past_retention(now=now):
                keep = (
                    f"kept {pending.keep_days} days"
                    if pending.keep_days
                    else "expired ones"
                )
                self.stdout.write(
                    f"{pending.name:<26} {keep:<16} would delete {pending.rows}"
                )
            return
        run = prune_history(now=now, budget_s=options["budget"])
        for name, value in run.counts.items():
            self.stdout.write(f"{name:<26} {value}")
        if not run.counts.get("complete"):
            self.stdout.write("stopped at the budget: run it again to go on")
