"""One refresh cycle of one cluster (or one namespace shard of it): discover, ingest,
aggregate, recommend, store."""
# The cycle is idempotent and safe to run from several workers at once:
#
# - every container has a watermark (``Checkpoint.last_sample_at``): the newest grid
#   time whose samples are already in its checkpoint; a cycle reads only what lies after
#   it;
# - checkpoints are written with compare-and-swap on ``Checkpoint.version`` (a filtered
#   ``update()`` whose row count is checked): a worker that loses the race skips that
#   container, because the winner already applied the same samples;
# - an OOM kill enters the engine in the same transaction that stores its ``OomKill``
#   row, so it is counted exactly once;
# - the engine rows a process keeps between cycles (``warm_state.py``) are used only
#   while the stored checkpoint still has the version they continue: a restart resumes
#   from the checkpoints with the same result, and a failed cycle stores nothing but its
#   failed ``RefreshRun``.
#
# ``ingest_window`` is the one ingestion step, shared by the minute cycle
# (``refresh_cluster``) and the back-fill (``backfill.py``, one window per day).
# Discovery's upsert lives in ``discovery.py``, the feeding of the engine in
# ``ingest.py`` (all in ``services/refresh/``).

from __future__ import annotations

import contextlib
import gc
import logging
import math
import time
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from recommender.cluster.base import ClusterAdapter, ClusterSnapshot, OomKill
from recommender.engine.aggregation import AggregateSet
from recommender.errors import InvalidInput, NotFound
from recommender.models import (
    Checkpoint,
    Cluster,
    Container,
    Recommendation,
    RefreshRun,
)
from recommender.models import (
    OomKill as OomKillRow,
)
from recommender.services.admission import counters
from recommender.services.admission.generation import mark_admission_data_changed
from recommender.services.dashboard import namespace_totals
from recommender.services.refresh import (
    chunking,
    ingest,
    ooms,
    throttling,
    warm_state,
)
from recommender.services.refresh.adapters import (
    close_quietly,
    cluster_adapter_for,
    source_keeps_history,
    usage_source_for,
)
from recommender.services.refresh.bulk import (
    CAS_BATCH,
    compare_and_swap,
    insert_returning_pks,
)
from recommender.services.refresh.discovery import BATCH, Discovery, upsert_discovery
from recommender.services.refresh.ingest import STEP_S, Group, Row, Window
from recommender.services.refresh.node_prices import price_workloads
from recommender.services.refresh.recommend import (
    build_explanations,
    is_significant_change,
    recommend_window,
    values_of,
)
from recommender.services.runs import Phases, recorded_run
from recommender.services.savings_trend import record_snapshot_quietly
from recommender.sources.base import UsageGrid, UsageSource

logger = logging.getLogger(__name__)

__all__ = [
    "ingest_fleet",
    "ingest_window",
    "refresh_cluster",
]


def ingest_window(
    *,
    discovery: Discovery,
    source: UsageSource,
    end: datetime,
    history_s: float,
    snapshot_kills: Sequence[OomKill] = (),
    recommend: bool = True,
    run: RefreshRun | None = None,
    phases: Phases | None = None,
    live_pods: Mapping[int, Collection[str]] | None = None,
    checkpoints: CheckpointSchedule | None = None,
    keep_state: bool = True,
) -> dict[str, Any]:
    """Ingest every discovered container from its watermark up to ``end`` and commit.

    Reads the samples after each container's watermark (a first contact reads
    ``history_s`` back from ``discovery.now``) and the OOM kills up to ``end`` not
    stored yet (the source's OOM history when it has one), feeds them to the engine in
    time order, recommends when ``recommend`` is set, and stores checkpoints (moving
    the watermarks to ``end``), OOM kills and changed recommendations in one
    transaction. Returns the window's counts. A failure stores nothing of the window.
    With ``live_pods`` (pod names by workload id), the engine forgets the per-pod
    state of every other pod once the window is fed (upstream's DeleteRemovedPods).
    With ``checkpoints``, only the checkpoints that schedule picks are written (the
    others keep their watermark); without, every one that was fed. With a schedule
    and ``keep_state``, the engine rows of earlier windows of this process are used
    where they continue the stored checkpoints, and this window's are kept
    (``warm_state.py``).
    """
    phases = phases or Phases()
    end_s = math.floor(end.timestamp() / STEP_S) * STEP_S
    window = Window(
        discovery=discovery,
        end_s=end_s,
        history_s=history_s,
        keep_state=keep_state and checkpoints is not None,
    )
    with phases("ingest"):
        ingest.load_rows(window)
        start_s = ingest.start_s(window)
        if start_s is not None:
            history = ooms.oom_history(
                source, namespace=discovery.namespace, start_s=start_s, end_s=end_s
            )
            if ooms.keeps_oom_history(source) and start_s < end_s:
                # Asked: 1 when the source has no OOM series (cluster page).
                window.counts["oom_history_missing"] = int(history is None)
            ooms.attach_ooms(window, snapshot_kills=snapshot_kills, history=history)
            _read_and_feed(window, source, start_s, run)
        if live_pods is not None:
            _forget_gone_pods(window, live_pods)
    if recommend:
        with phases("recommend"):
            recommend_window(window, throttling.throttling_by_row(window, source))
    with phases("store"):
        _store(window, checkpoints)
    counts = dict(window.counts)
    counts.setdefault("errors", 0)
    counts.setdefault("samples", 0)
    if window.error_samples:
        counts["error_samples"] = window.error_samples
    return counts


def ingest_fleet(
    *,
    discovery: Discovery,
    source: UsageSource,
    chunk_containers: int | None = None,
    fresh_only: bool = True,
    run: RefreshRun | None = None,
    **window: Any,
) -> dict[str, Any]:
    """:func:`ingest_window` of the discovered fleet, first contacts in chunks.

    The workloads met for the first time (``fresh_only``; else every one: a back-fill
    step) go in chunks of about ``chunk_containers`` containers
    (``VPAWEB_FIRST_CONTACT_CHUNK_CONTAINERS``), one committed window each, after one
    window for the others; so the memory of a first contact does not grow with the
    fleet (``chunking.py``). A source that cannot read chosen workloads, or a fleet
    within one chunk, is one window, as before. Returns the windows' counts added up.
    """
    if chunk_containers is None:
        chunk_containers = int(settings.FIRST_CONTACT_CHUNK_CONTAINERS)
    parts: list[list[int]] = []
    if chunk_containers > 0 and chunking.can_select_workloads(source):
        chosen = (
            chunking.fresh_workloads(discovery)
            if fresh_only
            else set(discovery.spec_names)
        )
        parts = chunking.plan(discovery, chosen, chunk_containers)
    if len(parts) <= 1:
        return ingest_window(discovery=discovery, source=source, run=run, **window)
    in_parts = {w for part in parts for w in part}
    rest = [w for w in discovery.spec_names if w not in in_parts]
    total: dict[str, Any] = {}
    for number, part in enumerate(([rest] if rest else []) + parts):
        counts = ingest_window(
            discovery=chunking.restrict(discovery, part),
            source=source,
            # A first contact's chunks keep no engine rows: its memory stays that of
            # one chunk (the next cycle decodes them once).
            keep_state=bool(rest) and number == 0,
            **window,
        )
        chunking.add_counts(total, counts)
        if run is not None:
            RefreshRun.objects.filter(pk=run.pk).update(
                progress=(number + 1) / (len(parts) + bool(rest))
            )
    total["first_contact_chunks"] = len(parts)
    return total


def _read_and_feed(
    window: Window, source: UsageSource, start_s: float, run: RefreshRun | None
) -> None:
    """Read usage one day at a time from ``start_s`` and feed it, OOMs in time order."""
    pieces = ingest.chunks(start_s, window.end_s)
    if not pieces:
        # Nothing new to read, but kills not stored yet must still enter the engine.
        ingest.feed_chunk(
            window, UsageGrid.empty(), window.end_s, window.end_s, is_first=True
        )
        return
    for number, (chunk_start, chunk_end) in enumerate(pieces):
        grid = ingest.read_usage(
            source,
            namespace=window.discovery.namespace,
            start_s=chunk_start,
            end_s=chunk_end,
            workloads=window.discovery.chunk_keys,
        )
        ingest.feed_chunk(window, grid, chunk_start, chunk_end, is_first=number == 0)
        if run is not None and len(pieces) > 2:
            RefreshRun.objects.filter(pk=run.pk).update(
                progress=(number + 1) / len(pieces)
            )


def cluster_to_run(cluster_id: int, *, now: datetime) -> Cluster:
    """The cluster a refresh or back-fill works on, once ``now`` is known to be
    timezone-aware."""
    if timezone.is_naive(now):
        raise InvalidInput("now must be timezone-aware", field="now")
    try:
        return Cluster.objects.get(pk=cluster_id)
    except Cluster.DoesNotExist:
        raise NotFound(f"cluster {cluster_id} does not exist") from None


def discover_and_store(
    cluster: Cluster,
    adapter: ClusterAdapter,
    *,
    now: datetime,
    namespace: str | None,
    phases: Phases,
) -> tuple[ClusterSnapshot, Discovery]:
    """Read what the cluster runs (phase ``discover``) and store it (``upsert``): the
    first two steps of a refresh and of a back-fill."""
    with phases("discover"):
        snapshot = adapter.discover()
        # The simulated cluster's admissions of new pods, saved in one go.
        counters.flush_counts()
    with phases("upsert"):
        discovery = upsert_discovery(
            cluster=cluster, snapshot=snapshot, now=now, namespace=namespace
        )
    return snapshot, discovery


def refresh_cluster(
    *, cluster_id: int, now: datetime, namespace: str | None = None
) -> RefreshRun:
    """Run one recommendation cycle of the cluster (or of one namespace, a shard) and
    return its RefreshRun row.

    A failure (a source that is down, a broken answer) ends the run as failed with the
    error, keeps every stored recommendation and checkpoint, and is raised again.
    """
    if namespace is not None and not (isinstance(namespace, str) and namespace):
        raise InvalidInput(f"namespace={namespace!r} must be a name", field="namespace")
    cluster = cluster_to_run(cluster_id, now=now)
    with (
        cyclic_gc_paused(),
        recorded_run(
            kind=RefreshRun.Kind.REFRESH,
            cluster=cluster,
            namespace=namespace,
            detail=f"as of {now.isoformat()}",
        ) as recorder,
    ):
        recorder.describe_failure = lambda message: (
            f"{recorder.phases.current} failed: {message}. Stored recommendations and "
            "checkpoints are unchanged; the next cycle starts again from them."
        )
        phases = recorder.phases
        adapter: object = None
        source: object = None
        with totals_stored(cluster, now=now, namespace=namespace, phases=phases):
            try:
                # A shard lists only its namespace (docs/refresh.md, "Shards").
                adapter = cluster_adapter_for(
                    cluster, now=now, namespace=namespace, flush_admissions=False
                )
                source = usage_source_for(cluster)
                snapshot, discovery = discover_and_store(
                    cluster, adapter, now=now, namespace=namespace, phases=phases
                )
                # The workloads' prices, from the nodes their pods run on.
                discovery.counts["prices_changed"] = price_workloads(
                    pod_nodes=discovery.pod_nodes, source=source, now=now
                )
                counts = ingest_fleet(
                    discovery=discovery,
                    source=source,
                    end=now,
                    history_s=ingest.history_days(cluster) * 86400.0,
                    snapshot_kills=snapshot.oom_kills,
                    run=recorder.run,
                    phases=phases,
                    live_pods=_live_pods(discovery),
                    checkpoints=(
                        CheckpointSchedule.from_settings()
                        if source_keeps_history(source)
                        else None  # a live sample not stored now is lost
                    ),
                )
            finally:
                close_quietly(adapter, source)
        recorder.counts = {**discovery.counts, **counts}
        if "oom_history_missing" in counts:
            ooms.record_oom_history(
                cluster, is_missing=bool(counts["oom_history_missing"]), now=now
            )
    # New recommendations, workloads and LimitRanges: the webhook's cache reloads.
    mark_admission_data_changed()
    # The savings trend: the first successful refresh of each hour snapshots the
    # cluster's namespaces (services/savings_trend.py).
    record_snapshot_quietly(cluster=cluster, now=now)
    return recorder.run


@contextlib.contextmanager
def totals_stored(
    cluster: Cluster, *, now: datetime, namespace: str | None, phases: Phases
) -> Iterator[None]:
    """Store the overview's totals of what the block refreshed (the cluster, or its
    shard's namespace) after it, as phase ``totals``; also after a failure, since
    what the block committed before it (discovery's workloads) stays, but then
    without hiding that failure."""
    try:
        yield
    except BaseException:
        try:
            namespace_totals.store(cluster=cluster, now=now, namespace=namespace)
        except Exception:
            logger.exception(
                "cluster %s: the namespaces' totals were not stored", cluster
            )
        raise
    with phases("totals"):
        namespace_totals.store(cluster=cluster, now=now, namespace=namespace)


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, as it was after.

    A cycle allocates a few objects per container (rows read, rows compared, engine
    rows) and frees them by reference counting; the collector walked them again and
    again as they piled up: about a third of a steady cycle at 10,000 containers
    (docs/refresh.md, "Measured"). What the block leaves in reference cycles is
    collected by the next automatic pass after it.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _live_pods(discovery: Discovery) -> dict[int, set[str]]:
    """Pod names of each workload that discovery saw alive in this pass."""
    live: dict[int, set[str]] = defaultdict(set)
    for (_namespace, pod), workload_id in discovery.pod_owner.items():
        live[workload_id].add(pod)
    return live


def _forget_gone_pods(window: Window, live_pods: Mapping[int, Collection[str]]) -> None:
    """Drop the engine series of pods that are gone; their samples stay in the
    histograms. Without this every CronJob run would stay in its checkpoint."""
    dropped = 0
    for group in window.groups.values():
        assert group.aggregates is not None
        dropped += group.aggregates.prune_series(
            live_keys={
                row.index: live_pods.get(row.container.workload_id, ())
                for row in group.rows
            }
        )
    window.counts["series_dropped"] = dropped


@dataclass(frozen=True)
class CheckpointSchedule:
    """Which checkpoints a refresh writes (upstream: ``--checkpoints-timeout``).

    A checkpoint that changed materially (first contact, a new histogram key, no
    watermark yet, an OOM kill to store with it) is always written. Any other is
    written once it is ``interval_s`` old, oldest first, in bulk statements until
    ``timeout_s`` of the store phase has passed (the first statement always runs).
    One not written keeps its watermark: the next cycle reads those samples again,
    so nothing is lost or counted twice. ``None`` instead of a schedule writes every
    checkpoint that was fed (the back-fill, a source without history).
    """

    interval_s: float
    timeout_s: float

    @classmethod
    def from_settings(cls) -> CheckpointSchedule:
        """VPAWEB_CHECKPOINT_INTERVAL_S and VPAWEB_CHECKPOINTS_TIMEOUT_S."""
        return cls(
            interval_s=float(settings.CHECKPOINT_INTERVAL_S),
            timeout_s=float(settings.CHECKPOINTS_TIMEOUT_S),
        )


def _needs_write(row: Row, end_at: datetime) -> bool:
    """The row's checkpoint is behind this window (fed, new key, watermark behind)."""
    checkpoint = row.checkpoint
    return (
        row.is_fed
        or checkpoint.histogram_key != row.key_text
        or checkpoint.last_sample_at is None
        or checkpoint.last_sample_at < end_at
    )


def _is_material(row: Row) -> bool:
    """A change that must be stored now, whatever the schedule."""
    checkpoint = row.checkpoint
    return (
        row.is_rebuilt
        or bool(row.ooms)
        or checkpoint.histogram_key != row.key_text
        or checkpoint.last_sample_at is None
    )


def _store(window: Window, schedule: CheckpointSchedule | None = None) -> None:
    """Checkpoints (compare-and-swap, in bulk), OOM rows, changed recommendations."""
    now = window.now
    started = time.monotonic()
    end_at = datetime.fromtimestamp(window.end_s, tz=UTC)
    conflicts = written = deferred = 0
    kept: list[tuple[int, warm_state.Kept]] = []
    with transaction.atomic():
        for group in window.groups.values():
            assert group.aggregates is not None
            behind = [r for r in group.rows if _needs_write(r, end_at)]
            chosen = (
                behind if schedule is None else [r for r in behind if _is_material(r)]
            )
            won = _write_checkpoints(group.aggregates, chosen, end_at, now)
            if schedule is not None:
                due_at = now.timestamp() - schedule.interval_s
                due = sorted(
                    (
                        r
                        for r in behind
                        if not _is_material(r)
                        and r.checkpoint.updated_at.timestamp() <= due_at
                    ),
                    key=lambda r: r.checkpoint.updated_at,
                )
                # Written a statement at a time, the clock read between them: the
                # budget holds however many rows one group has.
                for start in range(0, len(due), CAS_BATCH):
                    if start and time.monotonic() - started > schedule.timeout_s:
                        break
                    batch = due[start : start + CAS_BATCH]
                    won |= _write_checkpoints(group.aggregates, batch, end_at, now)
                    chosen += batch
                deferred += len(behind) - len(chosen)
            written += len(won)
            conflicts += len(chosen) - len(won)
            kept += _kept_rows(window, group, {r.checkpoint.pk for r in chosen}, won)
            stored_kills = [
                (row, kill)
                for row in chosen
                if row.checkpoint.pk in won
                for kill in row.ooms
            ]
            OomKillRow.objects.bulk_create(
                [
                    OomKillRow(
                        container_id=row.container.pk,
                        pod=kill.pod,
                        occurred_at=kill.occurred_at,
                        memory_request_bytes=kill.memory_request_bytes,
                        is_eviction=kill.is_eviction,
                    )
                    for row, kill in stored_kills
                ],
                batch_size=BATCH,
                ignore_conflicts=True,
            )
            window.stored_kills.update(ooms.kill_key(kill) for _, kill in stored_kills)
        changed = _store_recommendations(
            [row for group in window.groups.values() for row in group.rows], now
        )
    if window.keep_state:
        # Stored: the next window of this process may go on from these rows.
        warm_state.keep(kept, scope=window.scope)
        warm_state.keep_stored_kills(window.stored_kills, scope=window.scope)
    window.counts["checkpoints_written"] = written
    window.counts["checkpoint_conflicts"] = conflicts
    window.counts["checkpoints_deferred"] = deferred
    window.counts["recommendations_changed"] = changed


def _kept_rows(
    window: Window, group: Group, chosen: set[int], won: set[int]
) -> list[tuple[int, warm_state.Kept]]:
    """The group's rows as the next window may take them (``warm_state``): a written
    checkpoint's version moved on by one, a deferred one's did not; a lost
    compare-and-swap keeps nothing (the winner's state stands)."""
    assert group.aggregates is not None
    out = []
    for row in group.rows:
        pk = row.checkpoint.pk
        if pk in chosen and pk not in won:
            continue
        out.append(
            (
                pk,
                warm_state.Kept(
                    aggregates=group.aggregates,
                    row=row.index,
                    key_text=row.key_text,
                    version=row.checkpoint.version + (pk in won),
                    fed_until_s=window.end_s,
                    scope=window.scope,
                ),
            )
        )
    return out


def _write_checkpoints(
    aggregates: AggregateSet, rows: Sequence[Row], end_at: datetime, now: datetime
) -> set[int]:
    """Compare-and-swap the checkpoints of ``rows``; the pks this writer won."""
    if not rows:
        return set()
    blobs = aggregates.to_checkpoints([r.index for r in rows])
    counts = aggregates.sample_count()
    cas_rows = []
    for row, blob in zip(rows, blobs, strict=True):
        checkpoint = row.checkpoint
        # The watermark: every grid time up to end_s is in this checkpoint.
        watermark = (
            max(end_at, checkpoint.last_sample_at or end_at)
            if (checkpoint.histogram_key == row.key_text)
            else end_at
        )
        cas_rows.append(
            (
                checkpoint.pk,
                checkpoint.version,
                {
                    "histogram_key": row.key_text,
                    "state": blob,
                    "last_sample_at": watermark,
                    "sample_count": int(counts[row.index]),
                    "updated_at": now,
                },
            )
        )
    won = compare_and_swap(
        Checkpoint, expect="version", rows=cas_rows, increment="version"
    )
    for row in rows:
        if row.checkpoint.pk not in won:
            # Another worker stored these samples first; its result stands.
            logger.info(
                "checkpoint of container %s changed under us; skipped",
                row.container.pk,
            )
    return won


# The columns a new Recommendation row is written with (the primary key comes back).
_RECOMMENDATION_COLUMNS = tuple(
    f.name for f in Recommendation._meta.concrete_fields if not f.primary_key
)


def _store_recommendations(rows: Sequence[Row], now: datetime) -> int:
    """A new Recommendation row for each row whose values moved (explanations built
    for those only), then the compare-and-swap of each container's pointer: a
    concurrent cycle that already moved it wins. Returns how many were stored."""
    moved = [
        row
        for row in rows
        if row.recommendation is not None
        and is_significant_change(
            row.container.latest_values, values_of(row.recommendation)
        )
    ]
    if not moved:
        return 0
    explanations = build_explanations(
        [row.recommendation["explanation"] for row in moved]  # type: ignore[index]
    )
    new = []
    for row, explanation in zip(moved, explanations, strict=True):
        values = values_of(row.recommendation)  # type: ignore[arg-type]
        new.append(
            Recommendation(
                container_id=row.container.pk,
                created_at=now,
                profile=row.profile.name,
                target_cpu_millicores=values[0],
                target_memory_bytes=values[1],
                lower_cpu_millicores=values[2],
                lower_memory_bytes=values[3],
                upper_cpu_millicores=values[4],
                upper_memory_bytes=values[5],
                uncapped_cpu_millicores=values[6],
                uncapped_memory_bytes=values[7],
                explanation=explanation,
            )
        )
    for rec in new:
        rec.fill_explanation_columns()  # the bulk insert skips save()
    # Up to 10,000 rows a statement (each about 2.5 KB of explanation: a 25 MB
    # document) and 50,000 pointers (three integers each), where the backend takes
    # so many (bulk.py): a few statements even when most bounds moved at once.
    insert_returning_pks(new, fields=_RECOMMENDATION_COLUMNS, batch=10_000)
    won = compare_and_swap(
        Container,
        expect="latest_recommendation",
        rows=[
            (
                row.container.pk,
                row.container.latest_recommendation_id,
                {"latest_recommendation": rec.pk},
            )
            for row, rec in zip(moved, new, strict=True)
        ],
        batch=50_000,
    )
    lost = [
        rec.pk
        for row, rec in zip(moved, new, strict=True)
        if row.container.pk not in won
    ]
    for start in range(0, len(lost), BATCH):
        Recommendation.objects.filter(pk__in=lost[start : start + BATCH]).delete()
    for row, rec in zip(moved, new, strict=True):
        if row.container.pk in won:
            row.container.latest_recommendation_id = rec.pk
            row.container.latest_values = rec.values_tuple()
    return len(won)
