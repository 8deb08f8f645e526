"""`manage.py run_scheduler`: the periodic refresh loop for the embedded default."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from recommender.management.scheduler import run_periodic


class Command(BaseCommand):
    """Refresh every cluster periodically until SIGTERM or SIGINT."""

    help = "Refresh every VPAWEB_REFRESH_INTERVAL_S seconds (no Celery beat)."

    def add_arguments(self, parser: CommandParser) -> None:
        """--interval and --cycles (for scripts and tests)."""
        parser.add_argument(
            "--interval",
            type=float,
            default=None,
            help="seconds between cycles (default: the setting)",
        )
        parser.add_argument(
            "--cycles",
            type=int,
            default=None,
            help="stop after this many cycles (default: run until stopped)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Loop until a signal asks to stop; a cycle in progress finishes first."""
        stop = threading.Event()
        interval = options["interval"] or float(settings.REFRESH_INTERVAL_S)

        def on_signal(number: int, frame: FrameType | None) -> None:
            self.stdout.write(
                f"{signal.Signals(number).name}: stopping after this cycle"
            )
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.stdout.write(f"scheduler: refreshing every {interval:g}s (Ctrl-C to stop)")
        cycles = run_periodic(
            stop=stop, interval_s=interval, max_cycles=options["cycles"]
        )
        self.stdout.write(f"scheduler stopped after {cycles} cycle(s)")
