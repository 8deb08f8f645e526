"""Back-fill: usage history read at first contact, resumably, with progress.

A back-fill is the refresh cycle's own ingestion (``recommender.services.refresh``)
run from each container's watermark (or ``now`` minus the history length) up to
``now`` in steps of one day, each step committed on its own: checkpoints are written
with compare-and-swap and move the watermark to the step's end. So a back-fill that is
stopped (a worker killed, Prometheus down) keeps every finished day, and running it
again resumes where it stopped; a refresh cycle running meanwhile never double-counts,
because both sides skip what lies at or before a watermark.

OOM kills come from the cluster snapshot and, when the source keeps history of them
(Prometheus' kube-state-metrics), from the source over the whole range first.

A ``namespace`` makes the back-fill one shard: only that namespace's series are read
and only its containers are written, so shards run in parallel on several workers.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from recommender.cluster.base import ClusterAdapter, OomKill
from recommender.errors import InvalidInput, NotFound, VpawebError
from recommender.models import Cluster, RefreshRun, Workload
from recommender.services import refresh
from recommender.services.adapters import cluster_adapter_for, usage_source_for
from recommender.sources.base import UsageGrid, UsageSource

logger = logging.getLogger(__name__)

# One committed step per day of history: what a failure can cost, and the progress
# granularity (8 steps for upstream's 8 days).
STEP_S = 86_400.0

ProgressCallback = Callable[[RefreshRun], None]


class _ShardSource:
    """A usage source restricted to one namespace (refresh asks for all of them)."""

    def __init__(self, source: UsageSource, namespace: str) -> None:
        self.source = source
        self.namespace = namespace

    def fetch_usage(
        self, *, namespace: str | None, start_s: float, end_s: float, step_s: float
    ) -> UsageGrid:
        return self.source.fetch_usage(
            namespace=self.namespace, start_s=start_s, end_s=end_s, step_s=step_s
        )


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
    the cluster's own (``services.adapters``). A failure marks the run failed with what
    went wrong and how far it got, keeps everything stored, and is raised again.
    """
    if timezone.is_naive(now):
        raise InvalidInput("now must be timezone-aware", field="now")
    days = settings.PROMETHEUS_BACKFILL_DAYS if days is None else days
    if not (isinstance(days, int | float) and 0 < days <= 366):
        raise InvalidInput(f"days={days!r} must be in (0, 366]", field="days")
    try:
        cluster = Cluster.objects.get(pk=cluster_id)
    except Cluster.DoesNotExist:
        raise NotFound(f"cluster {cluster_id} does not exist") from None
    run = RefreshRun.objects.create(
        cluster=cluster,
        kind=RefreshRun.Kind.BACKFILL,
        shard=namespace or "",
        started_at=timezone.now(),
    )
    logger.info(
        "back-fill of cluster %s shard %r (run %s): %s days up to %s",
        cluster.name,
        namespace or "*",
        run.pk,
        days,
        now,
    )
    started = time.perf_counter()
    where = "discovery"
    counts: dict[str, Any] = {"steps_done": 0, "samples": 0, "oom_kills_new": 0}
    try:
        adapter = adapter or cluster_adapter_for(cluster, now=now)
        source = source or usage_source_for(cluster)
        end_s = math.floor(now.timestamp() / refresh.STEP_S) * refresh.STEP_S
        base = refresh._Cycle(
            cluster=cluster, now=now, end_s=end_s, history_s=days * 86_400.0
        )
        snapshot = adapter.discover()
        refresh._upsert_discovery(base, snapshot)
        if namespace is not None:
            _restrict_to_namespace(base, namespace)
            source = _ShardSource(source, namespace)
        refresh._load_rows(base)
        if not base.rows_by_container:
            counts["containers"] = 0
            return _finish(run, counts, started, on_progress)
        start_s = min(row.start_s for row in base.rows_by_container.values())
        step_ends = _step_ends(start_s, end_s)
        counts["containers"] = len(base.rows_by_container)
        counts["steps"] = len(step_ends)
        where = "reading OOM history"
        kills = list(snapshot.oom_kills) + _oom_history(
            source, namespace=namespace, start_s=start_s, end_s=end_s
        )
        step_start = start_s
        for number, step_end in enumerate(step_ends, start=1):
            where = (
                f"step {number}/{len(step_ends)} "
                f"({_iso(step_start)} .. {_iso(step_end)})"
            )
            _run_step(
                base,
                source=source,
                run=run,
                kills=kills,
                step_end=step_end,
                is_last=step_end >= end_s,
                counts=counts,
            )
            counts["steps_done"] = number
            _report(run, counts, progress=number / len(step_ends), cb=on_progress)
            step_start = step_end
    except Exception as exc:
        message = exc.message if isinstance(exc, VpawebError) else repr(exc)
        run.status = RefreshRun.Status.FAILED
        run.error = (
            f"back-fill failed at {where}: {message}. The {counts['steps_done']} "
            "finished step(s) are stored and every stored recommendation is kept; run "
            "the back-fill again to resume from there."
        )
        run.finished_at = timezone.now()
        run.counts = counts
        run.timings = {"total_s": round(time.perf_counter() - started, 4)}
        run.save(update_fields=["status", "error", "finished_at", "counts", "timings"])
        logger.error("back-fill run %s failed: %s", run.pk, run.error)
        if on_progress:
            on_progress(run)
        raise
    return _finish(run, counts, started, on_progress)


def _run_step(
    base: refresh._Cycle,
    *,
    source: UsageSource,
    run: RefreshRun,
    kills: Sequence[OomKill],
    step_end: float,
    is_last: bool,
    counts: dict[str, Any],
) -> None:
    """One committed day: refresh's ingestion from each watermark up to ``step_end``."""
    cycle = refresh._Cycle(
        cluster=base.cluster, now=base.now, end_s=step_end, history_s=base.history_s
    )
    cycle.pod_owner = base.pod_owner
    cycle.workload_by_name = base.workload_by_name
    cycle.spec_names = base.spec_names
    # Fresh rows: the watermarks and checkpoint versions the previous step committed.
    refresh._load_rows(cycle)
    # Only kills up to the step's end: a kill stored now but fed later would be lost.
    refresh._attach_ooms(
        cycle, [k for k in kills if k.occurred_at.timestamp() <= step_end]
    )
    refresh._ingest(cycle, source, run)
    if is_last:
        # Recommend once, on the whole history; earlier steps only move checkpoints.
        refresh._recommend(cycle)
    refresh._store(cycle)
    for name in ("samples", "oom_kills_new", "checkpoint_conflicts", "errors"):
        counts[name] = counts.get(name, 0) + int(cycle.counts.get(name, 0))
    for name in ("series_unmatched", "recommendations_changed"):
        if name in cycle.counts:
            counts[name] = int(cycle.counts[name])


def _restrict_to_namespace(cycle: refresh._Cycle, namespace: str) -> None:
    """Keep only the shard's workloads in the cycle."""
    ids = set(
        Workload.objects.filter(
            pk__in=list(cycle.spec_names), namespace=namespace
        ).values_list("pk", flat=True)
    )
    cycle.spec_names = {k: v for k, v in cycle.spec_names.items() if k in ids}


def _oom_history(
    source: UsageSource, *, namespace: str | None, start_s: float, end_s: float
) -> list[OomKill]:
    """OOM kills the source remembers (Prometheus: kube-state-metrics), if it can."""
    fetch = getattr(source, "fetch_oom_kills", None)
    if fetch is None and isinstance(source, _ShardSource):
        fetch = getattr(source.source, "fetch_oom_kills", None)
    if fetch is None:
        return []
    return list(
        fetch(namespace=namespace, start_s=start_s, end_s=end_s, step_s=refresh.STEP_S)
    )


def _step_ends(start_s: float, end_s: float) -> list[float]:
    """Ends of the committed steps from ``start_s`` to ``end_s``, on the sample grid."""
    ends = []
    edge = start_s
    while edge < end_s:
        edge = min(math.floor((edge + STEP_S) / refresh.STEP_S) * refresh.STEP_S, end_s)
        ends.append(edge)
    return ends


def _report(
    run: RefreshRun,
    counts: dict[str, Any],
    *,
    progress: float,
    cb: ProgressCallback | None,
) -> None:
    """Store progress and counts so the dashboard and the command can show them."""
    run.progress = progress
    run.counts = dict(counts)
    RefreshRun.objects.filter(pk=run.pk).update(progress=progress, counts=run.counts)
    if cb:
        cb(run)


def _finish(
    run: RefreshRun,
    counts: dict[str, Any],
    started: float,
    on_progress: ProgressCallback | None,
) -> RefreshRun:
    run.status = RefreshRun.Status.SUCCEEDED
    run.finished_at = timezone.now()
    run.progress = 1.0
    run.counts = counts
    run.timings = {"total_s": round(time.perf_counter() - started, 4)}
    run.save(update_fields=["status", "finished_at", "progress", "counts", "timings"])
    logger.info("back-fill run %s done: %s", run.pk, counts)
    if on_progress:
        on_progress(run)
    return run


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d %H:%M")
