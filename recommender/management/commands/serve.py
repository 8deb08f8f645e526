"""`manage.py serve`: the scheduler loop in the background and the dashboard in front.

Django's development server (``runserver --noreload``) is fine for a local tool on
one machine; in a cluster, run gunicorn with Celery worker and beat instead
(docs/refresh.md).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.conf import settings
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from recommender.management.commands.bootstrap import DEMO_ADMIN, password_file
from recommender.management.scheduler import run_periodic


class Command(BaseCommand):
    """Serve the dashboard with the refresh loop running beside it."""

    help = "Run the refresh loop in a background thread and serve the dashboard."

    def add_arguments(self, parser: CommandParser) -> None:
        """--host, --port and --no-scheduler."""
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--no-scheduler",
            action="store_true",
            help="serve only (a Celery beat or run_scheduler refreshes)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Start the loop, print where to go, serve until Ctrl-C, then stop the loop."""
        _require_collected_static()
        stop = threading.Event()
        scheduler = None
        if not options["no_scheduler"]:
            interval = float(settings.REFRESH_INTERVAL_S)
            scheduler = threading.Thread(
                target=run_periodic,
                kwargs={"stop": stop, "interval_s": interval},
                name="vpaweb-scheduler",
                # A refresh in progress must not keep the process alive after Ctrl-C:
                # the next start resumes from the stored checkpoints.
                daemon=True,
            )
            scheduler.start()
            self.stdout.write(f"refreshing every {interval:g}s in the background")
        host = options["host"]
        shown = f"[{host}]" if ":" in host else host
        self.stdout.write(f"\n  vpaweb is at http://{shown}:{options['port']}/")
        path = password_file()
        if path.exists():
            self.stdout.write(
                f"  log in as {DEMO_ADMIN} / {path.read_text().strip()} (from {path})\n"
            )
        else:
            self.stdout.write(
                "  log in with your account (manage.py createsuperuser)\n"
            )
        if logging.getLogger().getEffectiveLevel() > logging.INFO:
            self.stdout.write(
                "  the log below shows warnings and errors only "
                "(LOG_LEVEL=INFO shows every refresh)\n"
            )
        try:
            call_command("runserver", f"{shown}:{options['port']}", use_reloader=False)
        finally:
            stop.set()
            if scheduler is not None:
                scheduler.join(timeout=5)


def _require_collected_static() -> None:
    """Pages name static files by their hashed names, read from collectstatic's
    manifest: without it every page would fail, so say what to run instead."""
    manifest = getattr(staticfiles_storage, "manifest_name", None)
    if settings.DEBUG or manifest is None or staticfiles_storage.exists(manifest):
        return
    raise CommandError(
        f"no collected static files in {settings.STATIC_ROOT}: run "
        "`manage.py collectstatic --no-input` first (`make run` does)"
    )
