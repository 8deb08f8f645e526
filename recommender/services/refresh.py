"""One refresh cycle of one cluster: discover, ingest, aggregate, recommend, store.

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

The numeric work is batched: one ``AggregateSet`` per profile histogram key per cycle,
fed one day of samples at a time.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from recommender.cluster.base import ClusterSnapshot, OomKill, WorkloadInfo
from recommender.engine.aggregation import AggregateSet, OomBatch, SampleBatch
from recommender.engine.capping import (
    MODE_OFF,
    ContainerPolicy,
    apply_vpa_policy,
    select_container_policy,
)
from recommender.engine.estimator import recommend
from recommender.engine.profiles import Profile, get_profile
from recommender.engine.resources import RESOURCE_NAMES, Resources
from recommender.errors import InvalidInput, NotFound, SourceUnavailable, VpawebError
from recommender.models import (
    Checkpoint,
    Cluster,
    Container,
    Policy,
    Recommendation,
    RefreshRun,
    Workload,
)
from recommender.models import (
    OomKill as OomKillRow,
)
from recommender.services.adapters import cluster_adapter_for, usage_source_for
from recommender.services.policies import parse_container_policies
from recommender.sources.base import UsageSource

logger = logging.getLogger(__name__)

# Upstream's recommender loop and metrics resolution: one sample per container per
# minute.
STEP_S = 60.0
# Back-fill one day per source call: bounded memory, and OOM kills enter the engine in
# time order with the samples around them (upstream drops OOMs older than the newest
# memory sample minus one window).
CHUNK_S = 86400.0
# Upstream's history length (--history-length 8d) for clusters without their own
# setting.
DEFAULT_HISTORY_DAYS = 8.0
# Rows per bulk statement: under every backend's parameter limit.
BATCH = 500
# A new Recommendation row is stored when a target changes at all, or a bound moves by
# at least this fraction. The bounds drift a little every minute as confidence grows
# (upstream's (1 + 1/conf) multiplier); storing each drift would write a row per
# container per minute and bury the history the dashboard draws.
BOUND_CHANGE_FRACTION = 0.01


@dataclass
class _Row:
    """One container (an engine aggregate) taking part in this cycle."""

    container: Container
    checkpoint: Checkpoint
    profile: Profile
    key_text: str
    container_policy: ContainerPolicy | None
    containers_in_pod: int
    start_s: float  # samples at or before this are already in the checkpoint
    index: int = 0  # row in its group's AggregateSet
    is_fed: bool = False  # got samples or OOM kills this cycle
    ooms: list[OomKill] = field(default_factory=list)
    recommendation: dict[str, Any] | None = None


@dataclass
class _Group:
    """Rows sharing one histogram key, and so one AggregateSet."""

    profile: Profile
    rows: list[_Row] = field(default_factory=list)
    aggregates: AggregateSet | None = None


@dataclass
class _Cycle:
    """The state of one cycle between its phases."""

    cluster: Cluster
    now: datetime
    end_s: float
    history_s: float
    groups: dict[str, _Group] = field(default_factory=dict)
    rows_by_container: dict[tuple[int, str], _Row] = field(default_factory=dict)
    pod_owner: dict[tuple[str, str], int] = field(default_factory=dict)
    workload_by_name: dict[tuple[str, str], int] = field(default_factory=dict)
    # Container (name, kind) of each discovered workload's pod template, by workload id.
    spec_names: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=lambda: defaultdict(int))
    error_samples: list[str] = field(default_factory=list)

    def error(self, message: str) -> None:
        """Count a per-workload problem that does not stop the cycle."""
        logger.warning("refresh of cluster %s: %s", self.cluster.name, message)
        self.counts["errors"] += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(message)


def refresh_cluster(*, cluster_id: int, now: datetime) -> RefreshRun:
    """Run one recommendation cycle of the cluster and return its RefreshRun row.

    A failure (a source that is down, a broken answer) ends the run as failed with the
    error, keeps every stored recommendation and checkpoint, and is raised again.
    """
    if timezone.is_naive(now):
        raise InvalidInput("now must be timezone-aware", field="now")
    try:
        cluster = Cluster.objects.get(pk=cluster_id)
    except Cluster.DoesNotExist:
        raise NotFound(f"cluster {cluster_id} does not exist") from None
    run = RefreshRun.objects.create(
        cluster=cluster, kind=RefreshRun.Kind.REFRESH, started_at=timezone.now()
    )
    logger.info("refresh of cluster %s (run %s) as of %s", cluster.name, run.pk, now)
    phases = _Phases()
    timings = phases.timings
    started = time.perf_counter()
    try:
        cycle = _compute_cycle(cluster=cluster, now=now, run=run, phases=phases)
        with phases("store"):
            _store(cycle)
    except Exception as exc:
        timings["total_s"] = time.perf_counter() - started
        message = (
            exc.message
            if isinstance(exc, VpawebError)
            else f"{type(exc).__name__}: {exc}"
        )
        run.status = RefreshRun.Status.FAILED
        run.error = (
            f"{phases.current} failed: {message}. Stored recommendations and "
            "checkpoints are unchanged; the next cycle starts again from them."
        )
        run.finished_at = timezone.now()
        run.timings = timings
        run.save(update_fields=["status", "error", "finished_at", "timings"])
        if isinstance(exc, VpawebError):
            logger.error(
                "refresh of cluster %s (run %s) failed: %s",
                cluster.name,
                run.pk,
                run.error,
            )
        else:
            logger.exception(
                "refresh of cluster %s (run %s) failed", cluster.name, run.pk
            )
        raise
    timings["total_s"] = time.perf_counter() - started
    counts = dict(cycle.counts)
    counts.setdefault("errors", 0)
    if cycle.error_samples:
        counts["error_samples"] = cycle.error_samples
    run.status = RefreshRun.Status.SUCCEEDED
    run.finished_at = timezone.now()
    run.progress = 1.0
    run.counts = counts
    run.timings = {name: round(seconds, 4) for name, seconds in timings.items()}
    run.save(update_fields=["status", "finished_at", "progress", "counts", "timings"])
    logger.info(
        "refresh of cluster %s (run %s) done in %.2fs: %s",
        cluster.name,
        run.pk,
        timings["total_s"],
        counts,
    )
    return run


class _Phases:
    """Times the phases of a cycle and remembers which one is running."""

    def __init__(self) -> None:
        self.current = ""
        self.timings: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        self.current = name
        tick = time.perf_counter()
        yield
        self.timings[f"{name}_s"] = time.perf_counter() - tick


def _compute_cycle(
    *, cluster: Cluster, now: datetime, run: RefreshRun, phases: _Phases
) -> _Cycle:
    """Discover, ingest and recommend; nothing of the engine state is stored yet."""
    with phases("discover"):
        adapter = cluster_adapter_for(cluster, now=now)
        source = usage_source_for(cluster)
        snapshot = adapter.discover()
    with phases("upsert"):
        cycle = _Cycle(
            cluster=cluster,
            now=now,
            end_s=math.floor(now.timestamp() / STEP_S) * STEP_S,
            history_s=_history_days(cluster) * 86400.0,
        )
        _upsert_discovery(cycle, snapshot)
    with phases("ingest"):
        _load_rows(cycle)
        _attach_ooms(cycle, snapshot.oom_kills)
        _ingest(cycle, source, run)
    with phases("recommend"):
        _recommend(cycle)
    return cycle


def expire_idle_aggregates(*, now: datetime) -> RefreshRun:
    """Drop checkpoints of aggregates idle for the profile's history (upstream: 8 days).

    Recommendations are history and stay; an active container whose checkpoint went
    gets a fresh one at the next discovery.
    """
    if timezone.is_naive(now):
        raise InvalidInput("now must be timezone-aware", field="now")
    run = RefreshRun.objects.create(
        kind=RefreshRun.Kind.EXPIRE, started_at=timezone.now()
    )
    started = time.perf_counter()
    checked = expired = 0
    checkpoints = (
        Checkpoint.objects.exclude(version=0)
        .select_related("container__workload__policy")
        .order_by("pk")
    )
    groups: dict[str, tuple[Profile, list[Checkpoint]]] = {}
    for checkpoint in checkpoints.iterator(chunk_size=BATCH):
        profile = _profile_or_default(checkpoint.container.workload)
        key_text = _key_text(profile)
        # A checkpoint of other histogram settings is rebuilt by the next refresh
        # anyway.
        if checkpoint.histogram_key != key_text or not checkpoint.state:
            continue
        groups.setdefault(key_text, (profile, []))[1].append(checkpoint)
    for profile, members in groups.values():
        for start in range(0, len(members), BATCH):
            batch = members[start : start + BATCH]
            aggregates = AggregateSet.from_checkpoints(
                profile, [bytes(c.state) for c in batch]
            )
            is_expired = aggregates.is_expired(now_s=now.timestamp())
            checked += len(batch)
            for checkpoint, gone in zip(batch, is_expired.tolist(), strict=True):
                if not gone:
                    continue
                # Only the version we judged: a refresh that just fed it keeps it.
                deleted, _ = Checkpoint.objects.filter(
                    pk=checkpoint.pk, version=checkpoint.version
                ).delete()
                if deleted:
                    expired += 1
                    logger.info(
                        "expired the idle aggregate of container %s (%s)",
                        checkpoint.container_id,
                        checkpoint.container,
                    )
    run.status = RefreshRun.Status.SUCCEEDED
    run.finished_at = timezone.now()
    run.progress = 1.0
    run.counts = {"checked": checked, "expired": expired}
    run.timings = {"total_s": round(time.perf_counter() - started, 4)}
    run.save(update_fields=["status", "finished_at", "progress", "counts", "timings"])
    return run


# --- discovery ------------------------------------------------------------------------


def _history_days(cluster: Cluster) -> float:
    """How far back the first contact with a container reads."""
    if cluster.kind == Cluster.Kind.SIMULATED:
        return float(settings.SIMULATION_HISTORY_DAYS)
    return float(getattr(settings, "PROMETHEUS_BACKFILL_DAYS", DEFAULT_HISTORY_DAYS))


def _batches(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), BATCH):
        yield items[start : start + BATCH]


@transaction.atomic
def _upsert_discovery(cycle: _Cycle, snapshot: ClusterSnapshot) -> None:
    """Workload, Container, Policy and Checkpoint rows for what discovery found."""
    cluster, now = cycle.cluster, cycle.now
    existing = {
        (w.namespace, w.kind, w.name): w
        for w in Workload.objects.filter(cluster=cluster)
    }
    seen: dict[tuple[str, str, str], WorkloadInfo] = {}
    new_rows, changed = [], []
    for info in snapshot.workloads:
        key = (info.namespace, info.kind, info.name)
        seen[key] = info
        fields = {
            "uid": info.uid,
            "selector": info.selector,
            "replicas": info.replicas,
            "labels": info.labels,
            "is_active": True,
            "last_seen_at": now,
        }
        workload = existing.get(key)
        if workload is None:
            new_rows.append(
                Workload(
                    cluster=cluster,
                    kind=info.kind,
                    namespace=info.namespace,
                    name=info.name,
                    first_seen_at=now,
                    **fields,
                )
            )
        elif any(getattr(workload, name) != value for name, value in fields.items()):
            for name, value in fields.items():
                setattr(workload, name, value)
            changed.append(workload)
    # ignore_conflicts: a concurrent cycle may have created the same workload just now.
    Workload.objects.bulk_create(new_rows, batch_size=BATCH, ignore_conflicts=True)
    Workload.objects.bulk_update(
        changed,
        ["uid", "selector", "replicas", "labels", "is_active", "last_seen_at"],
        batch_size=BATCH,
    )
    vanished = [w.pk for key, w in existing.items() if key not in seen and w.is_active]
    for chunk in _batches(vanished):
        Workload.objects.filter(pk__in=chunk).update(is_active=False)
    if vanished:
        logger.info(
            "cluster %s: %d workloads vanished, marked inactive",
            cluster.name,
            len(vanished),
        )
    cycle.counts["workloads_new"] = len(new_rows)
    cycle.counts["workloads_vanished"] = len(vanished)

    workloads = {
        (w.namespace, w.kind, w.name): w
        for w in Workload.objects.filter(cluster=cluster, is_active=True)
    }
    with_policy = set(
        Policy.objects.filter(workload__cluster=cluster).values_list(
            "workload_id", flat=True
        )
    )
    # New workloads start in Off mode (recommend only) with upstream's profile.
    Policy.objects.bulk_create(
        [
            Policy(workload=w, mode=Policy.Mode.OFF, profile="vpa", updated_at=now)
            for w in workloads.values()
            if w.pk not in with_policy
        ],
        batch_size=BATCH,
        ignore_conflicts=True,
    )

    containers = {
        (c.workload_id, c.name): c
        for c in Container.objects.filter(
            workload__cluster=cluster, workload__is_active=True
        )
    }
    new_containers, changed_containers = [], []
    for key, info in seen.items():
        workload = workloads[key]
        cycle.workload_by_name.setdefault((info.namespace, info.name), workload.pk)
        for pod in info.pods:
            cycle.pod_owner[(pod.namespace, pod.name)] = workload.pk
        for position, spec in enumerate(info.containers):
            fields = {
                "kind": spec.kind,
                "position": position,
                "request_cpu_millicores": spec.requests.cpu_millicores,
                "request_memory_bytes": spec.requests.memory_bytes,
                "limit_cpu_millicores": spec.limits.cpu_millicores,
                "limit_memory_bytes": spec.limits.memory_bytes,
            }
            container = containers.get((workload.pk, spec.name))
            if container is None:
                new_containers.append(
                    Container(workload=workload, name=spec.name, **fields)
                )
            elif any(
                getattr(container, name) != value for name, value in fields.items()
            ):
                for name, value in fields.items():
                    setattr(container, name, value)
                changed_containers.append(container)
    Container.objects.bulk_create(
        new_containers, batch_size=BATCH, ignore_conflicts=True
    )
    Container.objects.bulk_update(
        changed_containers,
        [
            "kind",
            "position",
            "request_cpu_millicores",
            "request_memory_bytes",
            "limit_cpu_millicores",
            "limit_memory_bytes",
        ],
        batch_size=BATCH,
    )
    # Every aggregate gets its checkpoint row up front, so that later writes are all
    # compare-and-swap updates.
    without_checkpoint = Container.objects.filter(
        workload__cluster=cluster, workload__is_active=True, checkpoint__isnull=True
    ).exclude(kind=Container.Kind.INIT)
    Checkpoint.objects.bulk_create(
        [
            Checkpoint(container=c, histogram_key="", state=b"", updated_at=now)
            for c in without_checkpoint
        ],
        batch_size=BATCH,
        ignore_conflicts=True,
    )
    cycle.counts["workloads"] = len(seen)
    Cluster.objects.filter(pk=cluster.pk).update(last_discovered_at=now)
    cycle.spec_names = {
        workloads[key].pk: [(c.name, c.kind) for c in info.containers]
        for key, info in seen.items()
    }


# --- ingestion ------------------------------------------------------------------------


def _key_text(profile: Profile) -> str:
    return json.dumps(list(profile.histogram_key))


def _profile_or_default(workload: Workload) -> Profile:
    try:
        return _profile_of(workload.policy)
    except (ValueError, TypeError, Policy.DoesNotExist):
        return get_profile("vpa")


def _profile_of(policy: Policy) -> Profile:
    return get_profile(policy.profile).with_overrides(
        **(policy.profile_overrides or {})
    )


def _load_rows(cycle: _Cycle) -> None:
    """The cycle's rows: non-init containers of the discovered workloads, by profile."""
    spec_names = cycle.spec_names
    containers = (
        Container.objects.filter(workload_id__in=list(spec_names))
        if len(spec_names) <= BATCH
        else Container.objects.filter(
            workload__cluster=cycle.cluster, workload__is_active=True
        )
    )
    by_workload: dict[int, list[Container]] = defaultdict(list)
    for container in containers.select_related(
        "workload__policy", "checkpoint", "latest_recommendation"
    ).order_by("workload_id", "position"):
        by_workload[container.workload_id].append(container)
    now_s = cycle.now.timestamp()
    for workload_id, names in spec_names.items():
        members = [
            c for c in by_workload.get(workload_id, []) if c.kind != Container.Kind.INIT
        ]
        wanted = {name for name, kind in names if kind != Container.Kind.INIT}
        members = [c for c in members if c.name in wanted]
        if not members:
            continue
        workload = members[0].workload
        try:
            profile = _profile_of(workload.policy)
            policies = parse_container_policies(
                workload.policy.container_policies or []
            )
        except (ValueError, TypeError, KeyError, VpawebError) as exc:
            cycle.error(f"workload {workload} skipped: its policy is invalid: {exc}")
            continue
        chosen = {c.name: select_container_policy(policies, c.name) for c in members}
        # Upstream splits the pod minimum over the containers that get a recommendation.
        in_pod = sum(1 for p in chosen.values() if p is None or p.mode != MODE_OFF)
        key_text = _key_text(profile)
        group = cycle.groups.setdefault(key_text, _Group(profile=profile))
        for container in members:
            checkpoint = container.checkpoint
            is_current = checkpoint.histogram_key == key_text and bool(checkpoint.state)
            watermark = (
                checkpoint.last_sample_at.timestamp()
                if (is_current and checkpoint.last_sample_at is not None)
                else -math.inf
            )
            row = _Row(
                container=container,
                checkpoint=checkpoint,
                profile=profile,
                key_text=key_text,
                container_policy=chosen[container.name],
                containers_in_pod=max(in_pod, 1),
                start_s=max(watermark, now_s - cycle.history_s),
                index=len(group.rows),
            )
            group.rows.append(row)
            cycle.rows_by_container[(workload_id, container.name)] = row
    for group in cycle.groups.values():
        blobs = [
            bytes(r.checkpoint.state)
            if r.checkpoint.histogram_key == r.key_text and r.checkpoint.state
            else None
            for r in group.rows
        ]
        try:
            group.aggregates = AggregateSet.from_checkpoints(group.profile, blobs)
        except ValueError as exc:
            # A corrupt checkpoint must not block the others: rebuild it from history.
            group.aggregates = _load_skipping_corrupt(cycle, group, blobs, exc)
    cycle.counts["containers"] = len(cycle.rows_by_container)


def _load_skipping_corrupt(
    cycle: _Cycle, group: _Group, blobs: list[bytes | None], first: ValueError
) -> AggregateSet:
    """Load row by row, replacing unreadable checkpoints by a back-fill from history."""
    logger.warning(
        "cluster %s: unreadable checkpoint (%s); rebuilding", cycle.cluster.name, first
    )
    now_s = cycle.now.timestamp()
    for i, blob in enumerate(blobs):
        if blob is None:
            continue
        try:
            AggregateSet.from_checkpoints(group.profile, [blob])
        except ValueError as exc:
            row = group.rows[i]
            cycle.error(f"checkpoint of {row.container} unreadable ({exc}); rebuilt")
            blobs[i] = None
            row.start_s = now_s - cycle.history_s
    return AggregateSet.from_checkpoints(group.profile, blobs)


def _owner(cycle: _Cycle, namespace: str, pod: str) -> int | None:
    """The workload of a pod: from discovery, else by name (a pod that is gone now)."""
    owner = cycle.pod_owner.get((namespace, pod))
    if owner is not None:
        return owner
    # Controllers name their pods "<workload>-<suffix>..." (CronJobs through their
    # Jobs).
    parts = pod.split("-")
    for cut in range(len(parts) - 1, 0, -1):
        owner = cycle.workload_by_name.get((namespace, "-".join(parts[:cut])))
        if owner is not None:
            cycle.pod_owner[(namespace, pod)] = owner
            return owner
    return None


def _row_of(cycle: _Cycle, namespace: str, pod: str, container: str) -> _Row | None:
    owner = _owner(cycle, namespace, pod)
    if owner is None:
        return None
    return cycle.rows_by_container.get((owner, container))


def _attach_ooms(cycle: _Cycle, kills: Sequence[OomKill]) -> None:
    """Give each row the OOM kills not stored yet: each enters the engine once."""
    matched: list[tuple[_Row, OomKill]] = []
    for kill in kills:
        row = _row_of(cycle, kill.namespace, kill.pod, kill.container)
        if row is not None:
            matched.append((row, kill))
    if not matched:
        return
    oldest = min(kill.occurred_at for _, kill in matched)
    stored = set(
        OomKillRow.objects.filter(
            container__workload__cluster=cycle.cluster, occurred_at__gte=oldest
        ).values_list("container_id", "pod", "occurred_at")
    )
    for row, kill in matched:
        if (row.container.pk, kill.pod, kill.occurred_at) not in stored:
            row.ooms.append(kill)
            cycle.counts["oom_kills_new"] += 1


def _chunks(start_s: float, end_s: float) -> list[tuple[float, float]]:
    chunks = []
    while start_s < end_s:
        chunks.append((start_s, min(start_s + CHUNK_S, end_s)))
        start_s += CHUNK_S
    return chunks


def _ingest(cycle: _Cycle, source: UsageSource, run: RefreshRun) -> None:
    """Feed every row the samples after its watermark, one day at a time."""
    rows = list(cycle.rows_by_container.values())
    if not rows:
        return
    start_s = min(r.start_s for r in rows)
    chunks = _chunks(start_s, cycle.end_s)
    cycle.counts["samples"] = 0
    for number, (chunk_start, chunk_end) in enumerate(chunks):
        try:
            grid = source.fetch_usage(
                namespace=None, start_s=chunk_start, end_s=chunk_end, step_s=STEP_S
            )
        except VpawebError:
            raise
        except (OSError, ValueError) as exc:
            raise SourceUnavailable(
                f"usage source failed for {_iso(chunk_start)}..{_iso(chunk_end)}: {exc}"
            ) from exc
        _feed_chunk(cycle, grid, chunk_start, chunk_end, is_first=number == 0)
        if len(chunks) > 2:
            RefreshRun.objects.filter(pk=run.pk).update(
                progress=(number + 1) / len(chunks)
            )


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat()


def _feed_chunk(
    cycle: _Cycle, grid: Any, chunk_start: float, chunk_end: float, *, is_first: bool
) -> None:
    """Add one chunk's samples and OOM kills to each group's AggregateSet."""
    series_rows: list[_Row | None] = [
        _row_of(cycle, key.namespace, key.pod, key.container) for key in grid.series
    ]
    cycle.counts["series_unmatched"] = max(
        cycle.counts["series_unmatched"], sum(r is None for r in series_rows)
    )
    for key_text, group in cycle.groups.items():
        picked = [
            i
            for i, r in enumerate(series_rows)
            if r is not None and r.key_text == key_text
        ]
        assert group.aggregates is not None
        if picked and grid.timestamp_s.size:
            members = [series_rows[i] for i in picked]
            cpu = grid.cpu_cores[picked]
            memory = grid.memory_bytes[picked]
            # Samples at or before a row's watermark are in its checkpoint already.
            start = np.array([r.start_s for r in members])  # type: ignore[union-attr]
            old = grid.timestamp_s[None, :] <= start[:, None]
            cpu = np.where(old, np.nan, cpu)
            memory = np.where(old, np.nan, memory)
            has_data = ~(np.isnan(cpu).all(axis=1) & np.isnan(memory).all(axis=1))
            for row, fed in zip(members, has_data.tolist(), strict=True):
                row.is_fed = row.is_fed or fed  # type: ignore[union-attr]
            batch = SampleBatch.from_grid(
                series_aggregate=np.array([r.index for r in members], dtype=np.int64),  # type: ignore[union-attr]
                series_keys=[grid.series[i].pod for i in picked],
                timestamp_s=grid.timestamp_s,
                cpu_cores=cpu,
                memory_bytes=memory,
            )
            stats = group.aggregates.add_samples(batch)
            cycle.counts["samples"] += stats.cpu_accepted + stats.memory_accepted
            cycle.counts["samples_dropped"] += stats.cpu_dropped + stats.memory_dropped
        # OOM kills after the samples of their chunk, as upstream drains them after
        # the metrics of its pass; late ones (before the window) go with the first
        # chunk.
        kills = [
            (row, kill)
            for row in group.rows
            for kill in row.ooms
            if chunk_start < kill.occurred_at.timestamp() <= chunk_end
            or (is_first and kill.occurred_at.timestamp() <= chunk_start)
        ]
        if kills:
            keys = sorted({(row.index, kill.pod) for row, kill in kills})
            position = {key: i for i, key in enumerate(keys)}
            oom_batch = OomBatch(
                series_aggregate=np.array([k[0] for k in keys], dtype=np.int64),
                series_keys=[k[1] for k in keys],
                series_index=np.array(
                    [position[(row.index, kill.pod)] for row, kill in kills],
                    dtype=np.int64,
                ),
                timestamp_s=np.array(
                    [kill.occurred_at.timestamp() for _, kill in kills]
                ),
                memory_request_bytes=np.array(
                    [float(kill.memory_request_bytes) for _, kill in kills]
                ),
            )
            stats = group.aggregates.record_ooms(oom_batch)
            cycle.counts["oom_kills_accepted"] += stats.oom_accepted
            for row, _ in kills:
                row.is_fed = True


# --- recommendation -------------------------------------------------------------------


def _recommend(cycle: _Cycle) -> None:
    """Engine recommendations, capped by each container's policy."""
    for group in cycle.groups.values():
        assert group.aggregates is not None
        # Rows of one profile and one set of controlled resources go in one call.
        batches: dict[tuple[str, tuple[str, ...]], list[_Row]] = defaultdict(list)
        for row in group.rows:
            policy = row.container_policy
            if policy is not None and policy.mode == MODE_OFF:
                continue  # upstream gives a container with mode Off no recommendation
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
            results = recommend(
                group.aggregates,
                rows=[r.index for r in rows],
                profile=rows[0].profile,
                containers_in_pod=[r.containers_in_pod for r in rows],
                controlled_resources=controlled,
            )
            for row, result in zip(rows, results, strict=True):
                capped = apply_vpa_policy(result, row.container_policy)
                explanation = result.explanation.to_dict()
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


def _store(cycle: _Cycle) -> None:
    """Checkpoints (compare-and-swap), OOM rows and changed recommendations."""
    now = cycle.now
    end_at = datetime.fromtimestamp(cycle.end_s, tz=UTC)
    changed = conflicts = written = 0
    with transaction.atomic():
        for group in cycle.groups.values():
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
    cycle.counts["checkpoints_written"] = written
    cycle.counts["checkpoint_conflicts"] = conflicts
    cycle.counts["recommendations_changed"] = changed


def _store_recommendation(row: _Row, now: datetime) -> bool:
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
