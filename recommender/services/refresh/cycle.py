"""One refresh cycle of one cluster (or one namespace shard of it): discover, ingest,
aggregate, recommend, store.

The cycle is idempotent and safe to run from several workers at once:

- every container has a watermark (``Checkpoint.last_sample_at``): the newest grid time
  whose samples are already in its checkpoint; a cycle reads only what lies after it;
- checkpoints are written with compare-and-swap on ``Checkpoint.version`` (a filtered
  ``update()`` whose row count is checked): a worker that loses the race skips that
  container, because the winner already applied the same samples;
- an OOM kill enters the engine in the same transaction that stores its ``OomKill`` row,
  so it is counted exactly once;
- nothing of the engine state is kept in memory between cycles: a restart resumes from
  the checkpoints, and a failed cycle stores nothing but its failed ``RefreshRun``.

``ingest_window`` is the one ingestion step, shared by the minute cycle
(``refresh_cluster``) and the back-fill (``services/backfill.py``, one window per day).
Discovery upsert lives in ``services/discovery.py``, the feeding of the engine in
``services/refresh/ingest.py``.
"""

from __future__ import annotations

import json
import logging
import math
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from recommender.cluster.base import OomKill
from recommender.engine.aggregation import AggregateSet
from recommender.engine.capping import MODE_OFF, apply_vpa_policy
from recommender.engine.estimator import recommend
from recommender.engine.profiles import Profile
from recommender.engine.resources import RESOURCE_NAMES, Resources
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
from recommender.services.admission.generation import mark_admission_data_changed
from recommender.services.policies import overridden_fields
from recommender.services.refresh import ingest
from recommender.services.refresh.adapters import (
    close_quietly,
    cluster_adapter_for,
    usage_source_for,
)
from recommender.services.refresh.discovery import BATCH, Discovery, upsert_discovery
from recommender.services.refresh.ingest import STEP_S, Row, Window
from recommender.services.runs import Phases, recorded_run
from recommender.sources.base import UsageGrid, UsageSource

logger = logging.getLogger(__name__)

__all__ = [
    "BOUND_CHANGE_FRACTION",
    "expire_idle_aggregates",
    "ingest_window",
    "oom_kills_for",
    "refresh_cluster",
]

# A new Recommendation row is stored when a target changes at all, or a bound moves by
# at least this fraction. The bounds drift a little every minute as confidence grows
# (upstream's (1 + 1/conf) multiplier); storing each drift would write a row per
# container per minute and bury the history the dashboard draws.
BOUND_CHANGE_FRACTION = 0.01


def oom_kills_for(
    *, snapshot_kills: Sequence[OomKill], history: Sequence[OomKill] | None
) -> list[OomKill]:
    """The OOM kills of a window: the source's history when it keeps one, else the
    snapshot's.

    Both report the same kill at different times (the container's termination time vs.
    the grid time whose scrape saw the restart), which would store it twice; the
    source's time is on the sample grid, which makes ingestion exact. Memory evictions
    are only in the snapshot (Events), so they are always kept.
    """
    if history is None:
        return list(snapshot_kills)
    return list(history) + [k for k in snapshot_kills if k.is_eviction]


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
    """
    phases = phases or Phases()
    end_s = math.floor(end.timestamp() / STEP_S) * STEP_S
    window = Window(discovery=discovery, end_s=end_s, history_s=history_s)
    with phases("ingest"):
        ingest.load_rows(window)
        start_s = ingest.start_s(window)
        if start_s is not None:
            history = ingest.oom_history(
                source, namespace=discovery.namespace, start_s=start_s, end_s=end_s
            )
            ingest.attach_ooms(
                window, oom_kills_for(snapshot_kills=snapshot_kills, history=history)
            )
            _read_and_feed(window, source, start_s, run)
        if live_pods is not None:
            _forget_gone_pods(window, live_pods)
    if recommend:
        with phases("recommend"):
            _recommend(window)
    with phases("store"):
        _store(window)
    counts = dict(window.counts)
    counts.setdefault("errors", 0)
    counts.setdefault("samples", 0)
    if window.error_samples:
        counts["error_samples"] = window.error_samples
    return counts


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
        )
        ingest.feed_chunk(window, grid, chunk_start, chunk_end, is_first=number == 0)
        if run is not None and len(pieces) > 2:
            RefreshRun.objects.filter(pk=run.pk).update(
                progress=(number + 1) / len(pieces)
            )


def refresh_cluster(
    *, cluster_id: int, now: datetime, namespace: str | None = None
) -> RefreshRun:
    """Run one recommendation cycle of the cluster (or of one namespace, a shard) and
    return its RefreshRun row.

    A failure (a source that is down, a broken answer) ends the run as failed with the
    error, keeps every stored recommendation and checkpoint, and is raised again.
    """
    if timezone.is_naive(now):
        raise InvalidInput("now must be timezone-aware", field="now")
    if namespace is not None and not (isinstance(namespace, str) and namespace):
        raise InvalidInput(f"namespace={namespace!r} must be a name", field="namespace")
    try:
        cluster = Cluster.objects.get(pk=cluster_id)
    except Cluster.DoesNotExist:
        raise NotFound(f"cluster {cluster_id} does not exist") from None
    with recorded_run(
        kind=RefreshRun.Kind.REFRESH,
        cluster=cluster,
        namespace=namespace,
        detail=f"as of {now.isoformat()}",
    ) as recorder:
        recorder.describe_failure = lambda message: (
            f"{recorder.phases.current} failed: {message}. Stored recommendations and "
            "checkpoints are unchanged; the next cycle starts again from them."
        )
        phases = recorder.phases
        adapter: object = None
        source: object = None
        try:
            with phases("discover"):
                # A shard lists only its namespace (docs/refresh.md, "Shards").
                adapter = cluster_adapter_for(cluster, now=now, namespace=namespace)
                source = usage_source_for(cluster)
                snapshot = adapter.discover()
            with phases("upsert"):
                discovery = upsert_discovery(
                    cluster=cluster, snapshot=snapshot, now=now, namespace=namespace
                )
            counts = ingest_window(
                discovery=discovery,
                source=source,
                end=now,
                history_s=ingest.history_days(cluster) * 86400.0,
                snapshot_kills=snapshot.oom_kills,
                run=recorder.run,
                phases=phases,
                live_pods=_live_pods(discovery),
            )
        finally:
            close_quietly(adapter, source)
        recorder.counts = {**discovery.counts, **counts}
    # New recommendations, workloads and LimitRanges: the webhook's cache reloads.
    mark_admission_data_changed()
    return recorder.run


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


def expire_idle_aggregates(*, now: datetime) -> RefreshRun:
    """Forget the state of aggregates idle for the profile's history (upstream: 8 days).

    The checkpoint row is reset, not deleted (empty state and key, no watermark; a
    compare-and-swap on its version), so a refresh running meanwhile always finds its
    row; the next refresh rebuilds the state from history. Recommendations are history
    and stay. Checkpoints are judged a chunk at a time as they are read: memory is
    bounded by ``BATCH`` per histogram key, not by the fleet.

    Each row is judged on its own: a checkpoint that cannot be read (a corrupt blob,
    e.g. of a deleted workload) is logged, counted in ``counts["failed"]`` and left
    as it is (the next refresh of a live container rebuilds it), and the job goes on.
    """
    if timezone.is_naive(now):
        raise InvalidInput("now must be timezone-aware", field="now")
    with recorded_run(kind=RefreshRun.Kind.EXPIRE) as recorder:
        recorder.counts = _expire_all(now=now)
    return recorder.run


def _expire_all(*, now: datetime) -> dict[str, int]:
    """Judge every written checkpoint, a batch per histogram key; return the counts
    (``failed``: checkpoints that could not be read)."""
    checked = expired = failed = 0
    checkpoints = (
        Checkpoint.objects.exclude(version=0)
        .exclude(histogram_key="")  # never written, or reset by an earlier expiry
        .select_related("container__workload__policy")
        .order_by("pk")
    )
    buffers: dict[str, tuple[Profile, list[Checkpoint]]] = {}
    for checkpoint in checkpoints.iterator(chunk_size=BATCH):
        profile = ingest.profile_or_default(checkpoint.container.workload)
        key_text = ingest.key_text(profile)
        # A checkpoint of other histogram settings is rebuilt by the next refresh
        # anyway.
        if checkpoint.histogram_key != key_text or not checkpoint.state:
            continue
        members = buffers.setdefault(key_text, (profile, []))[1]
        members.append(checkpoint)
        if len(members) >= BATCH:
            checked += len(members)
            batch_expired, batch_failed = _expire_batch(profile, members, now=now)
            expired, failed = expired + batch_expired, failed + batch_failed
            members.clear()
    for profile, members in buffers.values():
        if members:
            checked += len(members)
            batch_expired, batch_failed = _expire_batch(profile, members, now=now)
            expired, failed = expired + batch_expired, failed + batch_failed
    return {"checked": checked, "expired": expired, "failed": failed}


def _idle_flags(
    profile: Profile, batch: list[Checkpoint], *, now: datetime
) -> list[bool | None]:
    """Per checkpoint: idle or not, or None when it cannot be read. The batch is read
    at once; if that fails, row by row, so one bad row costs only itself."""
    now_s = now.timestamp()
    try:
        aggregates = AggregateSet.from_checkpoints(
            profile, [bytes(c.state) for c in batch]
        )
        return list(aggregates.is_expired(now_s=now_s).tolist())
    except Exception:  # a bad row: found and counted one by one below
        pass
    flags: list[bool | None] = []
    for checkpoint in batch:
        try:
            one = AggregateSet.from_checkpoints(profile, [bytes(checkpoint.state)])
            flags.append(bool(one.is_expired(now_s=now_s)[0]))
        except Exception as exc:  # one unreadable row never stops the job
            logger.warning(
                "expiry: cannot read the checkpoint of container %s (%s, version "
                "%s): %s: %s; left as it is",
                checkpoint.container_id,
                checkpoint.container,
                checkpoint.version,
                type(exc).__name__,
                exc,
            )
            flags.append(None)
    return flags


def _expire_batch(
    profile: Profile, batch: list[Checkpoint], *, now: datetime
) -> tuple[int, int]:
    """Reset the idle checkpoints of one batch of one key; return (expired, failed)."""
    flags = _idle_flags(profile, batch, now=now)
    expired = 0
    for checkpoint, gone in zip(batch, flags, strict=True):
        if not gone:
            continue
        # Only the version we judged: a refresh that just fed it keeps it, and a
        # refresh holding this version loses its compare-and-swap and skips the row.
        reset = Checkpoint.objects.filter(
            pk=checkpoint.pk, version=checkpoint.version
        ).update(
            histogram_key="",
            state=b"",
            last_sample_at=None,
            sample_count=0,
            version=checkpoint.version + 1,
            updated_at=now,
        )
        if reset:
            expired += 1
            logger.info(
                "expired the idle aggregate of container %s (%s)",
                checkpoint.container_id,
                checkpoint.container,
            )
    return expired, flags.count(None)


# --- recommendation -------------------------------------------------------------------


def _recommend(window: Window) -> None:
    """Engine recommendations, capped by each container's policy."""
    for group in window.groups.values():
        assert group.aggregates is not None
        # Rows of one profile and one set of controlled resources go in one call.
        batches: dict[tuple[str, tuple[str, ...]], list[Row]] = defaultdict(list)
        for row in group.rows:
            policy = row.container_policy
            if policy is not None and policy.mode == MODE_OFF:
                continue  # upstream gives a container with mode Off no recommendation
            if group.aggregates.total_samples[row.index] == 0:
                # No usage, no recommendation (upstream's estimator would give the
                # pod minimums): the container shows "no data".
                window.counts["containers_without_samples"] += 1
                continue
            controlled = (
                policy.controlled_resources if policy else tuple(RESOURCE_NAMES)
            )
            batches[
                (
                    row.profile.name
                    + json.dumps(row.profile.to_dict(), sort_keys=True),
                    controlled,
                )
            ].append(row)
        for (_, controlled), rows in batches.items():
            # The policy's overrides, kept with the explanation so the dashboard shows
            # which fields differed from the named profile when this was computed.
            overrides = overridden_fields(rows[0].profile)
            results = recommend(
                group.aggregates,
                rows=[r.index for r in rows],
                profile=rows[0].profile,
                containers_in_pod=[r.containers_in_pod for r in rows],
                controlled_resources=controlled,
            )
            for row, result in zip(rows, results, strict=True):
                capped = apply_vpa_policy(result, row.container_policy)
                explanation = result.explanation_dict()
                explanation["caps"] = [
                    {
                        "resource": c.resource,
                        "bound": c.bound,
                        "reason": c.reason,
                        "before": c.before,
                        "after": c.after,
                    }
                    for c in capped.caps
                ]
                if overrides:
                    explanation["profile_overrides"] = overrides
                row.recommendation = {
                    "target": capped.target,
                    "lower": capped.lower_bound,
                    "upper": capped.upper_bound,
                    "uncapped": capped.uncapped_target,
                    "explanation": explanation,
                }


def _values(rec: dict[str, Any]) -> tuple[int | None, ...]:
    """The eight amounts in Recommendation.values_tuple() order."""
    out: list[int | None] = []
    for name in ("target", "lower", "upper", "uncapped"):
        resources: Resources = rec[name]
        out += [resources.cpu_millicores, resources.memory_bytes]
    return (out[0], out[1], out[2], out[3], out[4], out[5], out[6], out[7])


def _is_significant_change(
    old: Recommendation | None, new: tuple[int | None, ...]
) -> bool:
    """True when ``new`` deserves a Recommendation row of its own."""
    if old is None:
        return True
    before = old.values_tuple()
    for i, (a, b) in enumerate(zip(before, new, strict=True)):
        if a == b:
            continue
        if a is None or b is None:
            return True
        is_bound = 2 <= i <= 5  # lower and upper bounds
        if not is_bound or abs(b - a) >= BOUND_CHANGE_FRACTION * max(abs(a), 1):
            return True
    return False


# --- storing --------------------------------------------------------------------------


def _store(window: Window) -> None:
    """Checkpoints (compare-and-swap), OOM rows and changed recommendations."""
    now = window.now
    end_at = datetime.fromtimestamp(window.end_s, tz=UTC)
    changed = conflicts = written = 0
    with transaction.atomic():
        for group in window.groups.values():
            assert group.aggregates is not None
            dirty = [
                r
                for r in group.rows
                if r.is_fed
                or r.checkpoint.histogram_key != r.key_text
                or r.checkpoint.last_sample_at is None
                or r.checkpoint.last_sample_at < end_at
            ]
            blobs = group.aggregates.to_checkpoints() if dirty else []
            counts = group.aggregates.sample_count()
            is_dirty = {id(r) for r in dirty}
            new_ooms: list[OomKillRow] = []
            for row in group.rows:
                checkpoint = row.checkpoint
                if id(row) in is_dirty:
                    # The watermark: every grid time up to end_s is in this checkpoint.
                    watermark = (
                        max(end_at, checkpoint.last_sample_at or end_at)
                        if (checkpoint.histogram_key == row.key_text)
                        else end_at
                    )
                    updated = Checkpoint.objects.filter(
                        pk=checkpoint.pk, version=checkpoint.version
                    ).update(
                        histogram_key=row.key_text,
                        state=blobs[row.index],
                        last_sample_at=watermark,
                        sample_count=int(counts[row.index]),
                        version=checkpoint.version + 1,
                        updated_at=now,
                    )
                    if updated == 0:
                        # Another worker stored these samples first; its result stands.
                        conflicts += 1
                        logger.info(
                            "checkpoint of container %s changed under us; skipped",
                            row.container.pk,
                        )
                        continue
                    written += 1
                    new_ooms += [
                        OomKillRow(
                            container=row.container,
                            pod=kill.pod,
                            occurred_at=kill.occurred_at,
                            memory_request_bytes=kill.memory_request_bytes,
                            is_eviction=kill.is_eviction,
                        )
                        for kill in row.ooms
                    ]
                if row.recommendation is not None and _store_recommendation(row, now):
                    changed += 1
            OomKillRow.objects.bulk_create(
                new_ooms, batch_size=BATCH, ignore_conflicts=True
            )
    window.counts["checkpoints_written"] = written
    window.counts["checkpoint_conflicts"] = conflicts
    window.counts["recommendations_changed"] = changed


def _store_recommendation(row: Row, now: datetime) -> bool:
    """A new Recommendation row when the values moved; True when one was stored."""
    assert row.recommendation is not None
    container = row.container
    values = _values(row.recommendation)
    latest = container.latest_recommendation
    if not _is_significant_change(latest, values):
        return False
    rec = Recommendation.objects.create(
        container=container,
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
        explanation=row.recommendation["explanation"],
    )
    # Compare-and-swap on the pointer: a concurrent cycle that already moved it wins.
    moved = Container.objects.filter(
        pk=container.pk, latest_recommendation_id=latest.pk if latest else None
    ).update(latest_recommendation=rec)
    if not moved:
        rec.delete()
        return False
    container.latest_recommendation = rec
    return True
