"""One way to record a background run: ``recorded_run`` opens, times, finishes or fails
a ``RefreshRun`` row.

Refresh cycles, back-fills, expiry (and the updater) each are one row the dashboard
shows: RUNNING while it works, then SUCCEEDED with counts and phase timings, or FAILED
with what went wrong. Phases are timed in ``try/finally``, so a failed run still says
how long each phase took and which one failed."""
# A worker killed mid-run (out of memory, a hard time limit, a lost machine) cannot mark
# its own row. While the run works, a heartbeat thread renews the row's ``heartbeat_at``
# every quarter of a refresh interval (``VPAWEB_REFRESH_INTERVAL_S``); the next run of
# the same kind reaps a RUNNING row whose heartbeat is older than one refresh interval,
# or that outlived the task time limit (``VPAWEB_TASK_TIME_LIMIT_S``): it is marked
# FAILED, "worker lost", with a filtered ``update()`` so two runs starting at once reap
# it once.

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connections
from django.db.models import Q
from django.utils import timezone

from recommender import metrics
from recommender.errors import VpawebError
from recommender.models import Cluster, RefreshRun

logger = logging.getLogger(__name__)

WORKER_LOST = (
    "worker lost: the run was still marked running {age} after it started, its last "
    "heartbeat {silent} ago (a running run renews it every {beat_s:g} s; lost after "
    "{lost_after_s:g} s, or past the task time limit ({limit_s} s)); its worker was "
    "probably killed, or could not store how the run ended (the database away). "
    "What it had committed is kept."
)


def lost_after_s() -> float:
    """A run (or a refresh claim) not renewed for this long lost its process: one
    refresh interval, so a killed worker costs at most one interval."""
    return float(settings.REFRESH_INTERVAL_S)


def heartbeat_every_s() -> float:
    """How often a running process renews what it holds: four beats per lifetime,
    so one late beat never lets a live holder lapse."""
    return lost_after_s() / 4


@contextmanager
def heartbeat(beat: Callable[[], object], *, name: str) -> Iterator[None]:
    """Call ``beat`` every ``heartbeat_every_s()`` in a daemon thread while the block
    runs: a process that dies stops beating, and what it holds lapses. A failing beat
    (the database or Redis briefly away) is logged, and the next one tries again."""
    stop = threading.Event()
    every_s = heartbeat_every_s()

    def loop() -> None:
        try:
            while not stop.wait(every_s):
                try:
                    beat()
                except Exception as exc:
                    logger.warning("heartbeat of %s failed: %s", name, exc)
                    # A broken connection is not reused: the next beat reconnects.
                    connections.close_all()
        finally:
            # The thread's own database connection, if a beat opened one.
            connections.close_all()

    thread = threading.Thread(target=loop, name=f"heartbeat {name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        # A beat stuck on a lock must not hold up the run's end; a late one finds
        # the row no longer RUNNING, the claim gone, and changes nothing.
        thread.join(timeout=min(every_s, 1.0))


class Phases:
    """Times the phases of a run and remembers which one is running."""

    def __init__(self) -> None:
        self.current = ""
        self.timings: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        """Time the block as phase ``name`` (added up when it runs several times)."""
        self.current = name
        tick = time.perf_counter()
        try:
            yield
        finally:
            key = f"{name}_s"
            self.timings[key] = self.timings.get(key, 0.0) + time.perf_counter() - tick


class RunRecorder:
    """The open run handed to the body of ``recorded_run``."""

    def __init__(self, run: RefreshRun) -> None:
        self.run = run
        self.phases = Phases()
        self.counts: dict[str, Any] = {}
        self._started = time.perf_counter()
        # How a failure reads on the runs page: the caller may say more (where a
        # back-fill stopped, what stays stored). Takes the error's message.
        self.describe_failure: Callable[[str], str] = lambda message: (
            f"{self.phases.current or 'run'} failed: {message}"
        )

    def progress(
        self, fraction: float, *, counts: dict[str, Any] | None = None
    ) -> None:
        """Store progress (0..1), and counts so far, for the dashboard."""
        self.run.progress = fraction
        fields: dict[str, Any] = {"progress": fraction, "heartbeat_at": timezone.now()}
        if counts is not None:
            if counts is not self.counts:
                self.counts.clear()
                self.counts.update(counts)
            self.run.counts = self.counts
            fields["counts"] = self.counts
        RefreshRun.objects.filter(pk=self.run.pk).update(**fields)

    def timings(self) -> dict[str, float]:
        """Phase timings so far (seconds, rounded) and the total."""
        timings = {name: round(s, 4) for name, s in self.phases.timings.items()}
        timings["total_s"] = round(time.perf_counter() - self._started, 4)
        return timings


def _whole_seconds(delta: timedelta) -> timedelta:
    return timedelta(seconds=int(delta.total_seconds()))


def reap_lost_runs(*, kind: str, now: datetime) -> int:
    """Mark RUNNING rows of ``kind`` failed whose heartbeat is older than one refresh
    interval or that outlived the task time limit; count them."""
    limit_s = int(settings.CELERY_TASK_TIME_LIMIT)
    silent_s = lost_after_s()
    reaped = 0
    stale = RefreshRun.objects.filter(
        Q(started_at__lt=now - timedelta(seconds=limit_s))
        | Q(heartbeat_at__lt=now - timedelta(seconds=silent_s)),
        kind=kind,
        status=RefreshRun.Status.RUNNING,
    )
    for run in stale.only("pk", "started_at", "heartbeat_at"):
        reaped += RefreshRun.objects.filter(
            pk=run.pk, status=RefreshRun.Status.RUNNING
        ).update(
            status=RefreshRun.Status.FAILED,
            finished_at=now,
            error=WORKER_LOST.format(
                age=_whole_seconds(now - run.started_at),
                silent=_whole_seconds(now - (run.heartbeat_at or run.started_at)),
                beat_s=heartbeat_every_s(),
                lost_after_s=silent_s,
                limit_s=limit_s,
            ),
        )
    if reaped:
        logger.warning("%d lost %s run(s) marked failed", reaped, kind)
        metrics.REFRESH_RUNS.labels(kind=kind, outcome="failed").inc(reaped)
    return reaped


def start_run(
    *,
    kind: str,
    cluster: Cluster | None = None,
    namespace: str | None = None,
    detail: str = "",
) -> RefreshRun:
    """Reap lost runs of ``kind``, store this RUNNING row and log its start."""
    started_at = timezone.now()
    reap_lost_runs(kind=kind, now=started_at)
    run = RefreshRun.objects.create(
        cluster=cluster,
        kind=kind,
        shard=namespace or "",
        started_at=started_at,
        heartbeat_at=started_at,
    )
    logger.info(
        "%s of cluster %s shard %r (run %s) started%s",
        kind,
        cluster.name if cluster is not None else "*",
        namespace or "*",
        run.pk,
        f": {detail}" if detail else "",
    )
    return run


@contextmanager
def recorded_run(
    *,
    kind: str,
    cluster: Cluster | None = None,
    namespace: str | None = None,
    detail: str = "",
) -> Iterator[RunRecorder]:
    """Run the block as one recorded run: SUCCEEDED with the recorder's counts when it
    returns, FAILED (and the exception raised again) when it raises."""
    recorder = RunRecorder(
        start_run(kind=kind, cluster=cluster, namespace=namespace, detail=detail)
    )
    run = recorder.run

    def beat() -> None:
        RefreshRun.objects.filter(pk=run.pk, status=RefreshRun.Status.RUNNING).update(
            heartbeat_at=timezone.now()
        )

    try:
        with heartbeat(beat, name=f"{kind} run {run.pk}"):
            yield recorder
    except Exception as exc:
        message = (
            exc.message
            if isinstance(exc, VpawebError)
            else f"{type(exc).__name__}: {exc}"
        )
        run.status = RefreshRun.Status.FAILED
        run.error = recorder.describe_failure(message)
        run.finished_at = timezone.now()
        run.counts = recorder.counts
        run.timings = recorder.timings()
        run.save(update_fields=["status", "error", "finished_at", "counts", "timings"])
        metrics.record_finished_run(run)
        if isinstance(exc, VpawebError):
            logger.error("%s run %s failed: %s", kind, run.pk, run.error)
        else:
            logger.exception("%s run %s failed", kind, run.pk)
        raise
    run.status = RefreshRun.Status.SUCCEEDED
    run.finished_at = timezone.now()
    run.progress = 1.0
    run.counts = recorder.counts
    run.timings = recorder.timings()
    run.save(update_fields=["status", "finished_at", "progress", "counts", "timings"])
    metrics.record_finished_run(run)
    logger.info(
        "%s run %s done in %.2fs: %s",
        kind,
        run.pk,
        run.timings["total_s"],
        recorder.counts,
    )
