"""Back-fill: usage history read at first contact, resumably, with progress.

A back-fill is the refresh cycle's own ingestion step (``cycle.ingest_window``) run
from each container's watermark (or ``now`` minus the history length) up to ``now`` in
windows of one day, each committed on its own: checkpoints are written with
compare-and-swap and move the watermark to the window's end. So a back-fill that is
stopped (a worker killed, Prometheus down) keeps every finished day, and running it
again resumes where it stopped; a refresh cycle running meanwhile never double-counts,
because both sides skip what lies at or before a watermark. Samples and OOM kills enter
the engine in time order, so the result does not depend on where days are cut."""
# OOM kills come from the source when it keeps history of them (Prometheus'
# kube-state-metrics), else from the cluster snapshot.
#
# A ``namespace`` makes the back-fill one shard: only that namespace's series are read
# and only its containers are written, so shards run in parallel on several workers.

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from recommender.cluster.base import ClusterAdapter
from recommender.errors import InvalidInput
from recommender.models import RefreshRun
from recommender.services.connections import (
    close_quietly,
    cluster_adapter_for,
    usage_source_for,
)
from recommender.services.operations.runs import RunRecorder, recorded_run
from recommender.services.readmodels import upkeep as readmodels
from recommender.services.refresh import cycle, ingest
from recommender.services.refresh.discovery import Discovery
from recommender.services.refresh.ingest import STEP_S as SAMPLE_STEP_S
from recommender.services.refresh.ingest import Window
from recommender.services.refresh.plan import WindowPlan
from recommender.sources.base import UsageSource

logger = logging.getLogger(__name__)

# One committed step per day of history: what a failure can cost, and the progress
# granularity (8 steps for upstream's 8 days).
DAY_STEP_S = 86_400.0

ProgressCallback = Callable[[RefreshRun], None]


def backfill_cluster(
    *,
    cluster_id: int,
    now: datetime,
    namespace: str | None = None,
    days: float | None = None,
    adapter: ClusterAdapter | None = None,
    source: UsageSource | None = None,
    on_progress: ProgressCallback | None = None,
) -> RefreshRun:
    """Ingest history up to ``now`` one committed day at a time; return the run.

    ``days`` defaults to ``PROMETHEUS_BACKFILL_DAYS``; ``adapter`` and ``source`` to
    the cluster's own (``services.refresh.adapters``). A failure marks the run failed
    with what went wrong and how far it got, keeps everything stored, and is raised
    again.
    """
    days = settings.PROMETHEUS_BACKFILL_DAYS if days is None else days
    if not (isinstance(days, int | float) and 0 < days <= 366):
        raise InvalidInput(f"days={days!r} must be in (0, 366]", field="days")
    cluster = cycle.cluster_to_run(cluster_id, now=now)
    with recorded_run(
        kind=RefreshRun.Kind.BACKFILL,
        cluster=cluster,
        namespace=namespace,
        detail=f"{days:g} days up to {now.isoformat()}",
    ) as recorder:
        progress = _Progress(recorder, on_progress)
        # The refresh cycle's phase names, added up over the steps, for the runs page.
        phases = recorder.phases
        counts = recorder.counts
        counts.update(steps_done=0, samples=0, oom_kills_new=0)
        progress.where = "discovery"
        recorder.describe_failure = progress.describe_failure
        owned: list[object] = []
        try:
            with readmodels.kept_current(
                cluster,
                now=now,
                namespace=namespace,
                phases=phases,
                savings_snapshot=False,
            ):
                # Close only what this call opened; the caller owns what it passed in.
                if adapter is None:
                    adapter = cluster_adapter_for(
                        cluster, now=now, namespace=namespace, flush_admissions=False
                    )
                    owned.append(adapter)
                if source is None:
                    source = usage_source_for(cluster)
                    owned.append(source)
                end_s = math.floor(now.timestamp() / SAMPLE_STEP_S) * SAMPLE_STEP_S
                snapshot, discovery = cycle.discover_and_store(
                    cluster, adapter, now=now, namespace=namespace, phases=phases
                )
                start_s, containers = _oldest_watermark(
                    discovery, history_s=days * 86_400.0
                )
                # The shard's containers, whether or not any history is left to read
                # (all of them may be up to date: no step, still N containers).
                counts["containers"] = containers
                step_ends = [] if start_s is None else _step_ends(start_s, end_s)
                counts["steps"] = len(step_ends)
                step_start = start_s or end_s
                for number, step_end in enumerate(step_ends, start=1):
                    progress.where = (
                        f"step {number}/{len(step_ends)} "
                        f"({_iso(step_start)} .. {_iso(step_end)})"
                    )
                    # Every container of the step, in chunks when the source can read
                    # chosen workloads: memory bounded whatever the fleet (chunking.py).
                    step = cycle.ingest_fleet(
                        discovery=discovery,
                        source=source,
                        plan=WindowPlan.backfill_day(
                            end=datetime.fromtimestamp(step_end, tz=UTC),
                            history_s=days * 86_400.0,
                            snapshot_kills=snapshot.oom_kills,
                            is_last=step_end >= end_s,
                        ),
                        phases=phases,
                    )
                    _add_counts(counts, step)
                    counts["steps_done"] = number
                    progress.report(number / len(step_ends))
                    step_start = step_end
        except Exception:
            progress.failed()
            raise
        finally:
            close_quietly(*owned)
    progress.done()
    return recorder.run


class _Progress:
    """Where a back-fill is, for its failure message and its progress callback."""

    def __init__(self, recorder: RunRecorder, cb: ProgressCallback | None) -> None:
        self.recorder = recorder
        self.cb = cb
        self.where = ""

    def describe_failure(self, message: str) -> str:
        return (
            f"back-fill failed at {self.where}: {message}. The "
            f"{self.recorder.counts['steps_done']} finished step(s) are stored and "
            "every stored recommendation is kept; run the back-fill again to resume "
            "from there."
        )

    def report(self, fraction: float) -> None:
        """Store progress and counts so the dashboard and the command can show them."""
        self.recorder.progress(fraction, counts=self.recorder.counts)
        if self.cb:
            self.cb(self.recorder.run)

    def failed(self) -> None:
        # The run row is marked failed when recorded_run sees the exception; the
        # callback (the command's progress bar) hears of it first.
        self.recorder.run.status = RefreshRun.Status.FAILED
        if self.cb:
            self.cb(self.recorder.run)

    def done(self) -> None:
        if self.cb:
            self.cb(self.recorder.run)


def _oldest_watermark(
    discovery: Discovery, *, history_s: float
) -> tuple[float | None, int]:
    """Where the back-fill starts (the oldest watermark of the shard's containers)
    and how many containers the shard has."""
    window = Window(discovery=discovery, end_s=math.inf, history_s=history_s)
    ingest.load_rows(window)
    return ingest.start_s(window), len(window.rows_by_container)


def _add_counts(counts: dict[str, Any], step: dict[str, Any]) -> None:
    """Add one committed step's counts to the run's."""
    for name in (
        "samples",
        "late_samples",
        "oom_kills_new",
        "checkpoints_written",
        "checkpoint_conflicts",
        "errors",
    ):
        counts[name] = counts.get(name, 0) + int(step.get(name, 0))
    for name in ("containers", "series_unmatched", "recommendations_changed"):
        if name in step:
            counts[name] = int(step[name])


def _step_ends(start_s: float, end_s: float) -> list[float]:
    """Ends of the committed steps from ``start_s`` to ``end_s``, on the sample grid."""
    ends = []
    edge = start_s
    while edge < end_s:
        edge = min(
            math.floor((edge + DAY_STEP_S) / SAMPLE_STEP_S) * SAMPLE_STEP_S, end_s
        )
        ends.append(edge)
    return ends


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d %H:%M")
