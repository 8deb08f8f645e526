"""`manage.py backfill`: read a cluster's usage history now, with a progress bar."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from recommender.errors import VpawebError
from recommender.models import Cluster, RefreshRun
from recommender.services.refresh.backfill import backfill_cluster

BAR_WIDTH = 30


class Command(BaseCommand):
    help = (
        "Back-fill usage history (Prometheus: up to PROMETHEUS_BACKFILL_DAYS, one "
        "sample per minute) from each container's watermark to now. Resumable: run "
        "it again after a failure."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True, help="the cluster's name")
        parser.add_argument(
            "--namespace",
            action="append",
            default=[],
            help="back-fill only this namespace (a shard); repeat for several",
        )
        parser.add_argument(
            "--days",
            type=float,
            help="history length (default PROMETHEUS_BACKFILL_DAYS)",
        )
        parser.add_argument(
            "--now",
            help="read up to this RFC 3339 time instead of the current time",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cluster = Cluster.objects.get(name=options["cluster"])
        except Cluster.DoesNotExist:
            names = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none"
            raise CommandError(
                f"--cluster {options['cluster']!r} does not exist (have: {names})"
            ) from None
        now = _parse_now(options["now"]) if options["now"] else timezone.now()
        shards: list[str | None] = list(options["namespace"]) or [None]
        failed = []
        for shard in shards:
            label = shard or "all namespaces"
            try:
                run = backfill_cluster(
                    cluster_id=cluster.pk,
                    now=now,
                    namespace=shard,
                    days=options["days"],
                    on_progress=lambda r, label=label: self._draw(r, label),
                )
            except VpawebError as exc:
                self.stderr.write("")
                failed.append(f"{label}: {exc.message}")
                last = RefreshRun.objects.filter(
                    cluster=cluster, kind=RefreshRun.Kind.BACKFILL
                ).first()
                if last is not None and last.error:
                    self.stderr.write(self.style.ERROR(last.error))
                continue
            self.stderr.write("")
            counts = run.counts
            self.stdout.write(
                f"{cluster.name} {label}: {counts.get('containers', 0)} containers, "
                f"{counts.get('samples', 0)} samples, "
                f"{counts.get('late_samples', 0)} late samples filled, "
                f"{counts.get('oom_kills_new', 0)} OOM kills in "
                f"{run.duration_s or 0:.1f} s (run {run.pk})"
            )
        if failed:
            raise CommandError("back-fill failed for " + "; ".join(failed))

    def _draw(self, run: RefreshRun, label: str) -> None:
        """One progress line, redrawn in place on a terminal."""
        done = int(run.progress * BAR_WIDTH)
        bar = "#" * done + "." * (BAR_WIDTH - done)
        counts = run.counts or {}
        line = (
            f"{label}: [{bar}] {run.progress:4.0%} "
            f"day {counts.get('steps_done', 0)}/{counts.get('steps', 0)}, "
            f"{counts.get('samples', 0)} samples"
        )
        end = "\r" if sys.stderr.isatty() else "\n"
        self.stderr.write(line, ending=end)
        self.stderr.flush()


def _parse_now(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(f"--now {text!r} is not an RFC 3339 time") from None
    if timezone.is_naive(moment):
        raise CommandError(f"--now {text!r} has no time zone (add Z)")
    return moment
