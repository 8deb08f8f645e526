"""Ingestion of one window: each container's samples after its watermark, and the OOM
kills not stored yet, fed to the engine in time order.

Rows are loaded fresh (one named tuple per container, ``LoadedRow``), one
``AggregateSet`` per profile histogram key, from the stored states or the rows this
process kept (``warm_state.py``). Usage is read one day at a time and handed, with the
day's OOM kills, to ``engine/feed.py``: the one rule (shared with the offline command
and replay) that feeds samples up to an OOM's time, the OOM, then the rest, so the
order-dependent memory windows (upstream's ``ContainerState``,
``pkg/recommender/model/container.go``) do not depend on how history is split.
"""

from __future__ import annotations

import json
import logging
import math
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np
from django.conf import settings
from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast, Length
from django.db.models.lookups import GreaterThan

from recommender.cluster.base import OomKill
from recommender.engine.aggregation import AggregateSet, OomBatch, SampleBatch
from recommender.engine.capping import (
    MODE_OFF,
    ContainerPolicy,
    select_container_policy,
)
from recommender.engine.feed import feed
from recommender.engine.profiles import Profile
from recommender.engine.usage_hours import HourlyUsage, hourly_usage
from recommender.errors import SourceUnavailable, VpawebError
from recommender.models import Checkpoint, Cluster, Container
from recommender.services.policy.validation import named_profile as _named_profile
from recommender.services.policy.validation import parse_container_policies
from recommender.services.refresh import warm_state
from recommender.services.refresh.discovery import BATCH, Discovery
from recommender.sources.base import UsageGrid, UsageSource

logger = logging.getLogger(__name__)

# Upstream's recommender loop and metrics resolution: one sample per container per
# minute.
STEP_S = 60.0
# Usage is read one day per source call: bounded memory and bounded answers.
CHUNK_S = 86400.0
# Upstream's history length (--history-length 8d) for clusters without their own
# setting.
DEFAULT_HISTORY_DAYS = 8.0


@dataclass(slots=True)
class ContainerRef:
    """The columns of a container (and its workload) a window reads: read as plain
    tuples, not ORM objects, which cost most of a steady cycle at 100,000 containers."""

    pk: int
    workload_id: int
    name: str
    namespace: str
    workload: str  # "namespace/kind/name", as Workload.__str__
    latest_recommendation_id: int | None
    # Recommendation.values_tuple() of the latest recommendation (None: none yet).
    latest_values: tuple[int | None, ...] | None

    def __str__(self) -> str:
        return f"{self.workload}/{self.name}"


@dataclass(slots=True)
class CheckpointRef:
    """The columns of a container's checkpoint row a window reads and writes."""

    pk: int
    version: int
    histogram_key: str
    last_sample_at: datetime | None
    updated_at: datetime
    has_state: bool  # its state is not empty (read only when needed: load_rows)
    # What its writer read after the watermark, not stored: up to when, how many.
    read_through_at: datetime | None = None
    unsettled_samples: int = 0


@dataclass(slots=True)
class Row:
    """One container (an engine aggregate) taking part in a window."""

    container: ContainerRef
    checkpoint: CheckpointRef
    profile: Profile
    key_text: str
    container_policy: ContainerPolicy | None
    containers_in_pod: int
    start_s: float  # samples at or before this are already in the checkpoint
    # Live samples (metrics-server) taken at or before this were seen by an earlier
    # cycle: the ``now`` of the cycle that last wrote the checkpoint.
    seen_until_s: float = -math.inf
    # Samples at or before this are in the stored usage hours already: the stored
    # watermark, whatever the histogram key (a rebuild reads them again).
    usage_after_s: float = -math.inf
    index: int = 0  # row in its group's AggregateSet
    # Starts from an empty state (first contact, new histogram key, corrupt or expired
    # checkpoint): its stored OOM kills must enter the engine again.
    is_rebuilt: bool = False
    is_fed: bool = False  # got samples or OOM kills in this window
    ooms: list[OomKill] = field(default_factory=list)
    # (throttled CFS periods, periods) of the last hours, for a profile that boosts
    # on throttling (``throttling.py``); None: not read, or no counters.
    throttling: tuple[float, float] | None = None
    # Its checkpoint (state, sample count) at the window's settled end, when the window
    # settles late samples: what the store writes (the rest is read again).
    settled: tuple[bytes, int] | None = None
    # With ``settled``: samples (CPU and memory each count) read after the settled
    # end, and those read again up to the checkpoint's ``read_through_at``.
    unsettled_samples: int = 0
    reread_samples: int = 0
    recommendation: dict[str, Any] | None = None


@dataclass
class Group:
    """Rows sharing one histogram key, and so one AggregateSet."""

    profile: Profile
    rows: list[Row] = field(default_factory=list)
    aggregates: AggregateSet | None = None


@dataclass
class Window:
    """The state of one ingestion window between its phases."""

    discovery: Discovery
    end_s: float  # the newest grid time read; the watermark after storing
    history_s: float  # how far back from ``now`` a first contact reads
    # Samples may arrive this late: the checkpoints end ``settle_s`` before ``end_s``.
    settle_s: float = 0.0
    # A container met with no sample yet keeps no watermark this long (plan.py).
    history_wait_s: float = 0.0
    # Use and keep the engine rows of earlier windows of this process
    # (services/refresh/warm_state.py): only for a source that keeps history.
    keep_state: bool = False
    groups: dict[str, Group] = field(default_factory=dict)
    rows_by_container: dict[tuple[int, str], Row] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=lambda: defaultdict(int))
    error_samples: list[str] = field(default_factory=list)
    # The kills the source reported that are stored (found so, or written by this
    # window): with ``keep_state``, the next window skips them (warm_state.py).
    stored_kills: set[warm_state.KillKey] = field(default_factory=set)
    # Usage hours of the settled samples fed (keys: container ids), in parts: the
    # store adds those of the checkpoints it writes to the stored hours.
    usage: list[HourlyUsage] = field(default_factory=list)
    # The rows of this window and the cycle's later ones, read once (``read_rows``);
    # None: the window reads its own.
    loaded: dict[int, list[LoadedRow]] | None = None

    @property
    def settled_end_s(self) -> float:
        """The newest grid time whose samples are taken as complete: the watermark
        after storing, and the newest OOM kill this window feeds."""
        if not self.settle_s:
            return self.end_s
        return math.floor((self.end_s - self.settle_s) / STEP_S) * STEP_S

    @property
    def cluster(self) -> Cluster:
        """The cluster being ingested."""
        return self.discovery.cluster

    @property
    def scope(self) -> warm_state.Scope:
        """The (cluster, namespace) the window reads: the scope of what it keeps."""
        return (self.discovery.cluster.pk, self.discovery.namespace)

    @property
    def now(self) -> datetime:
        """The cycle's time: first contact reads ``history_s`` back from it."""
        return self.discovery.now

    def error(self, message: str) -> None:
        """Count a per-workload problem that does not stop the window."""
        logger.warning("refresh of cluster %s: %s", self.cluster.name, message)
        self.counts["errors"] += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(message)

    def row_of(
        self, namespace: str, pod: str, container: str, **owner: str
    ) -> Row | None:
        """The row of a pod's container, if its workload takes part."""
        workload_id = self.discovery.owner_of(namespace, pod, **owner)
        if workload_id is None:
            return None
        return self.rows_by_container.get((workload_id, container))


def history_days(cluster: Cluster) -> float:
    """How far back the first contact with a container reads."""
    if cluster.kind == Cluster.Kind.SIMULATED:
        return float(settings.SIMULATION_HISTORY_DAYS)
    return float(getattr(settings, "PROMETHEUS_BACKFILL_DAYS", DEFAULT_HISTORY_DAYS))


def key_text(profile: Profile) -> str:
    """A checkpoint's ``histogram_key``: the profile settings its state depends on."""
    return _key_text(profile.histogram_key)


@lru_cache(maxsize=256)
def _key_text(histogram_key: tuple[float, ...]) -> str:
    # Asked for every workload of every cycle; a fleet has a handful of these.
    return json.dumps(list(histogram_key))


_PolicyText = tuple[str | None, str | None, str | None]


class LoadedRow(NamedTuple):
    """One container as ``load_rows`` reads it (one query, no ORM objects): the
    columns of ``_ROW_COLUMNS``, by name."""

    pk: int
    workload_id: int
    name: str
    kind: str
    namespace: str
    workload_kind: str
    workload_name: str
    # The workload's policy: its profile's name and its JSON columns as text, parsed
    # once per distinct policy (_policy_of).
    policy_profile: str | None
    policy_overrides: str | None
    policy_containers: str | None
    checkpoint_pk: int
    checkpoint_version: int
    histogram_key: str
    last_sample_at: datetime | None
    checkpoint_updated_at: datetime
    # Whether the checkpoint has a state (None: no state column value): the state
    # itself is read for the rows that need it (_states).
    has_state: bool | None
    read_through_at: datetime | None
    unsettled_samples: int
    latest_recommendation_id: int | None
    # The latest recommendation's amounts, in Recommendation.values_tuple() order.
    target_cpu_millicores: int | None
    target_memory_bytes: int | None
    lower_cpu_millicores: int | None
    lower_memory_bytes: int | None
    upper_cpu_millicores: int | None
    upper_memory_bytes: int | None
    uncapped_cpu_millicores: int | None
    uncapped_memory_bytes: int | None

    @property
    def policy_text(self) -> _PolicyText:
        """What tells one policy from another."""
        return (self.policy_profile, self.policy_overrides, self.policy_containers)

    @property
    def latest_values(self) -> tuple[int | None, ...] | None:
        """Recommendation.values_tuple() of the latest recommendation (None: none)."""
        if self.latest_recommendation_id is None:
            return None
        return (
            self.target_cpu_millicores,
            self.target_memory_bytes,
            self.lower_cpu_millicores,
            self.lower_memory_bytes,
            self.upper_cpu_millicores,
            self.upper_memory_bytes,
            self.uncapped_cpu_millicores,
            self.uncapped_memory_bytes,
        )

    def refs(self) -> tuple[ContainerRef, CheckpointRef]:
        """The container and the checkpoint this row holds."""
        container = ContainerRef(
            pk=self.pk,
            workload_id=self.workload_id,
            name=self.name,
            namespace=self.namespace,
            workload=f"{self.namespace}/{self.workload_kind}/{self.workload_name}",
            latest_recommendation_id=self.latest_recommendation_id,
            latest_values=self.latest_values,
        )
        checkpoint = CheckpointRef(
            pk=self.checkpoint_pk,
            version=self.checkpoint_version,
            histogram_key=self.histogram_key,
            last_sample_at=self.last_sample_at,
            updated_at=self.checkpoint_updated_at,
            has_state=bool(self.has_state),
            read_through_at=self.read_through_at,
            unsettled_samples=self.unsettled_samples,
        )
        return container, checkpoint


# Each LoadedRow field's column (the annotations of load_rows included), in order.
_ROW_COLUMNS = (
    "pk",
    "workload_id",
    "name",
    "kind",
    "workload__namespace",
    "workload__kind",
    "workload__name",
    "workload__policy__profile",
    "policy_overrides",
    "policy_containers",
    "checkpoint__pk",
    "checkpoint__version",
    "checkpoint__histogram_key",
    "checkpoint__last_sample_at",
    "checkpoint__updated_at",
    "checkpoint_has_state",
    "checkpoint__read_through_at",
    "checkpoint__unsettled_samples",
    "latest_recommendation_id",
    *(
        f"latest_recommendation__{name}"
        for name in LoadedRow._fields[-8:]  # the amounts, target_cpu_millicores on
    ),
)
assert len(_ROW_COLUMNS) == len(LoadedRow._fields)


class KeptRef(NamedTuple):
    """Row ``row`` of a set kept from an earlier window (``AggregateSet.gather``
    takes it as the pair it is)."""

    aggregates: AggregateSet
    row: int


# Where each row's engine state comes from: a kept row, a stored state, or nothing
# (a new, empty aggregate).
StateSource = KeptRef | bytes | None


def _containers_of(discovery: Discovery) -> QuerySet[Container]:
    """The containers of ``discovery``'s workloads (a superset: the cluster's active
    ones when they are many, its namespace's for a shard or a namespace window)."""
    spec_names = discovery.spec_names
    containers = (
        Container.objects.filter(workload_id__in=list(spec_names))
        if len(spec_names) <= BATCH
        else Container.objects.filter(
            workload__cluster=discovery.cluster, workload__is_active=True
        )
    )
    if discovery.namespace is not None:
        # A shard (or a namespace window) reads its namespace's rows only.
        containers = containers.filter(workload__namespace=discovery.namespace)
    return containers


def read_rows(discovery: Discovery) -> dict[int, list[LoadedRow]]:
    """The non-init containers with a checkpoint of ``discovery``'s workloads, by
    workload, in one statement: what ``load_rows`` reads, read once for the
    windows of a cycle (``Window.loaded``)."""
    by_workload: dict[int, list[LoadedRow]] = defaultdict(list)
    for values in (
        _containers_of(discovery)
        .exclude(kind=Container.Kind.INIT)
        .filter(checkpoint__isnull=False)
        # The policy's JSON as text: parsed once per distinct policy (_policy_of).
        .annotate(
            policy_overrides=Cast("workload__policy__profile_overrides", TextField()),
            policy_containers=Cast("workload__policy__container_policies", TextField()),
            # Whether it has one only: the state is read for the rows that need it.
            # A comparison, not the length: an integer annotation gets a Python
            # converter on every row (Django's int(), for every backend).
            checkpoint_has_state=GreaterThan(Length("checkpoint__state"), 0),
        )
        .order_by("workload_id", "position")
        .values_list(*_ROW_COLUMNS)
    ):
        loaded = LoadedRow._make(values)
        by_workload[loaded.workload_id].append(loaded)
    return by_workload


def load_rows(window: Window) -> None:
    """The window's rows: non-init containers of discovered workloads, by profile;
    taken from ``window.loaded`` when the cycle read them for every window (each
    window's taken out, so what is held shrinks window by window)."""
    spec_names = window.discovery.spec_names
    containers = _containers_of(window.discovery)
    if window.loaded is None:
        by_workload = read_rows(window.discovery)
    else:
        by_workload = {
            w: window.loaded.pop(w) for w in spec_names if w in window.loaded
        }
    parsed: dict[_PolicyText, tuple[Profile, list[ContainerPolicy]] | Exception] = {}
    now_s = window.now.timestamp()
    for workload_id, names in spec_names.items():
        wanted = {name for name, kind in names if kind != Container.Kind.INIT}
        members = [c for c in by_workload.get(workload_id, []) if c.name in wanted]
        if not members:
            continue
        first = members[0]
        text_key = first.policy_text
        if text_key not in parsed:
            parsed[text_key] = _policy_of(*text_key)
        policy = parsed[text_key]
        if isinstance(policy, Exception):
            window.error(
                f"workload {first.namespace}/{first.workload_kind}/"
                f"{first.workload_name} skipped: its policy is invalid: {policy}"
            )
            continue
        profile, policies = policy
        chosen = {c.name: select_container_policy(policies, c.name) for c in members}
        # Upstream splits the pod minimum over the containers that get a recommendation.
        in_pod = sum(1 for p in chosen.values() if p is None or p.mode != MODE_OFF)
        text = key_text(profile)
        group = window.groups.setdefault(text, Group(profile=profile))
        for member in members:
            container, checkpoint = member.refs()
            is_current = checkpoint.histogram_key == text and checkpoint.has_state
            watermark = (
                checkpoint.last_sample_at.timestamp()
                if (is_current and checkpoint.last_sample_at is not None)
                else -math.inf
            )
            row = Row(
                container=container,
                checkpoint=checkpoint,
                profile=profile,
                key_text=text,
                container_policy=chosen[container.name],
                containers_in_pod=max(in_pod, 1),
                start_s=max(watermark, now_s - window.history_s),
                # A refresh's ``now`` lies within the step after its watermark; a
                # back-fill's early days (``now`` far after their end) saw nothing
                # live past the step after their watermark.
                seen_until_s=min(checkpoint.updated_at.timestamp(), watermark + STEP_S),
                usage_after_s=(
                    -math.inf
                    if checkpoint.last_sample_at is None
                    else checkpoint.last_sample_at.timestamp()
                ),
                index=len(group.rows),
            )
            group.rows.append(row)
            window.rows_by_container[(workload_id, container.name)] = row
    kept = _take_kept(window) if window.keep_state else {}
    _take_pending_usage(window, kept)
    states = _states(
        containers,
        [
            r.checkpoint.pk
            for group in window.groups.values()
            for r in group.rows
            if r.checkpoint.pk not in kept
            and r.checkpoint.histogram_key == r.key_text
            and r.checkpoint.has_state
        ],
    )
    for group in window.groups.values():
        sources: list[StateSource] = []
        for r in group.rows:
            held = kept.get(r.checkpoint.pk)
            if held is not None:
                sources.append(KeptRef(held.aggregates, held.row))
                r.start_s = held.fed_until_s
            else:
                sources.append(states.get(r.checkpoint.pk))
        group.aggregates = _same_set(sources) or _gather(window, group, sources)
        for row, source in zip(group.rows, sources, strict=True):
            row.is_rebuilt = source is None
    window.counts["containers"] = len(window.rows_by_container)
    window.counts["engine_rows_kept"] = len(kept)


def _take_pending_usage(window: Window, kept: dict[int, warm_state.Kept]) -> None:
    """The usage hours the kept rows were fed since their stored watermark (their
    checkpoint not written yet): this window stores them with the checkpoint."""
    pending = {id(k.usage): k.usage for k in kept.values() if k.usage is not None}
    if not pending:
        return
    taken = [
        r.container.pk
        for r in window.rows_by_container.values()
        if r.checkpoint.pk in kept
    ]
    window.usage += [usage.of_keys(taken) for usage in pending.values()]


def _take_kept(window: Window) -> dict[int, warm_state.Kept]:
    """The rows kept from an earlier window that continue their stored checkpoint."""
    kept = {}
    oldest_s = window.now.timestamp() - window.history_s
    for r in window.rows_by_container.values():
        watermark = r.checkpoint.last_sample_at
        held = warm_state.take(
            r.checkpoint.pk,
            version=r.checkpoint.version,
            key_text=r.key_text,
            has_state=r.checkpoint.histogram_key == r.key_text
            and r.checkpoint.has_state,
            watermark_s=-math.inf if watermark is None else watermark.timestamp(),
            oldest_s=oldest_s,
            end_s=window.end_s,
        )
        if held is not None:
            kept[r.checkpoint.pk] = held
    return kept


def _states(containers: QuerySet[Container], pks: list[int]) -> dict[int, bytes]:
    """The stored states of the checkpoints ``pks`` of ``containers``' rows, in one
    statement whatever their number."""
    if not pks:
        return {}
    wanted = set(pks)
    rows = (
        Checkpoint.objects.filter(pk__in=pks).values_list("pk", "state")
        if len(pks) <= BATCH
        else containers.values_list("checkpoint__pk", "checkpoint__state")
    )
    return {pk: bytes(state) for pk, state in rows if pk in wanted}


def _same_set(sources: Sequence[StateSource]) -> AggregateSet | None:
    """The kept set itself when it is exactly these rows, in order (a steady cycle of
    an unchanged fleet): nothing to copy."""
    if not sources or not isinstance(sources[0], KeptRef):
        return None
    aggregates = sources[0].aggregates
    if len(aggregates) != len(sources):
        return None
    for i, source in enumerate(sources):
        if not (
            isinstance(source, KeptRef)
            and source.aggregates is aggregates
            and source.row == i
        ):
            return None
    return aggregates


def _gather(
    window: Window,
    group: Group,
    sources: list[StateSource],
) -> AggregateSet:
    """The group's engine rows from kept rows and stored states; a corrupt checkpoint
    does not block the others: it is rebuilt from history."""
    try:
        return AggregateSet.gather(group.profile, sources)
    except ValueError as exc:
        return _load_skipping_corrupt(window, group, sources, exc)


def _policy_of(
    profile: str | None, overrides: str | None, container_policies: str | None
) -> tuple[Profile, list[ContainerPolicy]] | Exception:
    """A workload's profile and container policies from its policy's columns (the
    JSON as text), or the error that makes the policy unusable."""
    if profile is None:
        return ValueError("the workload has no policy")
    try:
        return (
            _named_profile(profile, json.loads(overrides or "null")),
            parse_container_policies(json.loads(container_policies or "[]") or []),
        )
    except (ValueError, TypeError, KeyError, VpawebError) as exc:
        return exc


def _load_skipping_corrupt(
    window: Window,
    group: Group,
    blobs: list[StateSource],
    first: ValueError,
) -> AggregateSet:
    """Load row by row, replacing unreadable checkpoints by a back-fill from history."""
    logger.warning(
        "cluster %s: unreadable checkpoint (%s); rebuilding", window.cluster.name, first
    )
    now_s = window.now.timestamp()
    for i, blob in enumerate(blobs):
        if not isinstance(blob, bytes):
            continue
        try:
            AggregateSet.from_checkpoints(group.profile, [blob])
        except ValueError as exc:
            row = group.rows[i]
            window.error(f"checkpoint of {row.container} unreadable ({exc}); rebuilt")
            blobs[i] = None
            row.start_s = now_s - window.history_s
    return AggregateSet.gather(group.profile, blobs)


def take_settled(window: Window) -> None:
    """Each row's checkpoint as fed so far (``Row.settled``): what the store writes
    for a window that reads the minutes after its settled end again next time."""
    for group in window.groups.values():
        assert group.aggregates is not None
        blobs = group.aggregates.to_checkpoints([r.index for r in group.rows])
        counts = group.aggregates.sample_count()
        for row, blob in zip(group.rows, blobs, strict=True):
            row.settled = (blob, int(counts[row.index]))


def count_late(window: Window) -> None:
    """``counts.late_samples``: the samples found now, up to what each checkpoint's
    writer had read, that it had not found (they arrived late)."""
    window.counts["late_samples"] += sum(
        max(r.reread_samples - r.checkpoint.unsettled_samples, 0)
        for r in window.rows_by_container.values()
        if r.checkpoint.read_through_at is not None and not r.is_rebuilt
    )


def start_s(window: Window) -> float | None:
    """The oldest watermark of the window's rows (None when it has no rows)."""
    rows = window.rows_by_container.values()
    return min(r.start_s for r in rows) if rows else None


def chunks(start_s: float, end_s: float) -> list[tuple[float, float]]:
    """``(start, end]`` intervals of at most CHUNK_S covering ``(start_s, end_s]``."""
    out = []
    while start_s < end_s:
        out.append((start_s, min(start_s + CHUNK_S, end_s)))
        start_s += CHUNK_S
    return out


def read_usage(
    source: UsageSource,
    *,
    namespace: str | None,
    start_s: float,
    end_s: float,
    workloads: Collection[tuple[str, str, str]] | None = None,
) -> UsageGrid:
    """One chunk of usage; a source's own failure becomes ``SourceUnavailable``.

    With ``workloads`` ((namespace, kind, name) of a first-contact chunk, see
    ``chunking.py``), a source that can (``selects_workloads``) reads only theirs.
    """
    try:
        if workloads is not None and source.selects_workloads:
            return source.fetch_workload_usage(
                workloads=workloads, start_s=start_s, end_s=end_s, step_s=STEP_S
            )
        return source.fetch_usage(
            namespace=namespace, start_s=start_s, end_s=end_s, step_s=STEP_S
        )
    except VpawebError:
        raise
    except (OSError, ValueError) as exc:
        raise SourceUnavailable(
            f"usage source failed for {_iso(start_s)}..{_iso(end_s)}: {exc}"
        ) from exc


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat()


def feed_chunk(
    window: Window,
    grid: UsageGrid,
    chunk_start: float,
    chunk_end: float,
    *,
    is_first: bool,
) -> None:
    """Add one chunk's samples and OOM kills to each group, in time order."""
    series_rows = [
        window.row_of(key.namespace, key.pod, key.container) for key in grid.series
    ]
    window.counts["series_unmatched"] = max(
        window.counts["series_unmatched"], sum(r is None for r in series_rows)
    )
    for text, group in window.groups.items():
        # Kills of this chunk; late ones (at or before the chunk) go with the first.
        kills = [
            (row, kill)
            for row in group.rows
            for kill in row.ooms
            if chunk_start < kill.occurred_at.timestamp() <= chunk_end
            or (is_first and kill.occurred_at.timestamp() <= chunk_start)
        ]
        picked = [
            i for i, r in enumerate(series_rows) if r is not None and r.key_text == text
        ]
        samples = _group_samples(
            grid, picked, [series_rows[i] for i in picked], now_s=window.now.timestamp()
        )
        if samples is not None and window.settle_s:
            _count_unsettled(samples, window.settled_end_s)
        if samples is not None and chunk_end <= window.settled_end_s:
            window.usage.append(_usage_of(samples))
        # Usage up to and including each OOM's time, then the OOMs of that time, in
        # upstream's units: engine/feed.py, the rule the offline command uses too.
        _feed(window, group, samples, kills)


@dataclass
class _Samples:
    """One group's part of a chunk: its series and their (S, T) values."""

    rows: list[Row]
    keys: list[str]
    timestamp_s: np.ndarray
    cpu_cores: np.ndarray
    memory_bytes: np.ndarray


def _group_samples(
    grid: UsageGrid, picked: list[int], members: list[Row | None], *, now_s: float
) -> _Samples | None:
    if not picked or not grid.timestamp_s.size:
        return None
    rows = [r for r in members if r is not None]
    # Samples at or before a row's watermark are in its checkpoint already.
    start = np.array([r.start_s for r in rows])
    old = grid.timestamp_s[None, :] <= start[:, None]
    if grid.observed_at_s is not None:
        # A live sample enters in the first cycle whose ``now`` is at or after it:
        # not one an earlier cycle saw, nor one taken after this cycle's ``now``
        # (the next cycle feeds that one).
        observed = grid.observed_at_s[picked]
        seen = np.array([r.seen_until_s for r in rows])
        old |= ((observed <= seen) | (observed > now_s))[:, None]
    return _Samples(
        rows=rows,
        keys=[grid.series[i].pod for i in picked],
        timestamp_s=grid.timestamp_s,
        cpu_cores=np.where(old, np.nan, grid.cpu_cores[picked]),
        memory_bytes=np.where(old, np.nan, grid.memory_bytes[picked]),
    )


def _usage_of(samples: _Samples) -> HourlyUsage:
    """The hourly usage of a group's chunk: the samples the engine is fed, but those
    the stored usage hours hold already (a rebuilt row reads its history again)."""
    after = np.array([r.usage_after_s for r in samples.rows])
    held = samples.timestamp_s[None, :] <= after[:, None]
    return hourly_usage(
        series_key=np.array([r.container.pk for r in samples.rows], dtype=np.int64),
        timestamp_s=samples.timestamp_s,
        cpu_cores=np.where(held, np.nan, samples.cpu_cores),
        memory_bytes=np.where(held, np.nan, samples.memory_bytes),
    )


def _count_unsettled(samples: _Samples, settled_end_s: float) -> None:
    """Count, per row, the samples after the settled end (stored with the checkpoint
    as its ``unsettled_samples``) and those up to what its checkpoint's writer had
    read (``read_through_at``): the difference is what arrived late."""
    times = samples.timestamp_s[None, :]
    found = (~np.isnan(samples.cpu_cores)).astype(np.int64) + (
        ~np.isnan(samples.memory_bytes)
    ).astype(np.int64)
    through = np.array(
        [
            -np.inf
            if r.is_rebuilt or r.checkpoint.read_through_at is None
            else r.checkpoint.read_through_at.timestamp()
            for r in samples.rows
        ]
    )
    unsettled = (found * (times > settled_end_s)).sum(axis=1)
    reread = (found * (times <= through[:, None])).sum(axis=1)
    for row, after, again in zip(
        samples.rows, unsettled.tolist(), reread.tolist(), strict=True
    ):
        row.unsettled_samples += after
        row.reread_samples += again


def _feed(
    window: Window,
    group: Group,
    samples: _Samples | None,
    kills: list[tuple[Row, OomKill]],
) -> None:
    """Feed the group's series of the chunk and its OOM kills through the one rule."""
    assert group.aggregates is not None
    batch = None
    if samples is not None:
        has_data = ~(
            np.isnan(samples.cpu_cores).all(axis=1)
            & np.isnan(samples.memory_bytes).all(axis=1)
        )
        for row, fed in zip(samples.rows, has_data.tolist(), strict=True):
            row.is_fed = row.is_fed or fed
        batch = SampleBatch.from_grid(
            series_aggregate=np.array([r.index for r in samples.rows], dtype=np.int64),
            series_keys=samples.keys,
            timestamp_s=samples.timestamp_s,
            cpu_cores=samples.cpu_cores,
            memory_bytes=samples.memory_bytes,
        )
    ooms = None
    if kills:
        # Upstream's RecordOOM per kill; OOMs of one time keep their order.
        kills = sorted(kills, key=lambda rk: rk[1].occurred_at.timestamp())
        keys = sorted({(row.index, kill.pod) for row, kill in kills})
        position = {key: i for i, key in enumerate(keys)}
        ooms = OomBatch(
            series_aggregate=np.array([k[0] for k in keys], dtype=np.int64),
            series_keys=[k[1] for k in keys],
            series_index=np.array(
                [position[(row.index, kill.pod)] for row, kill in kills],
                dtype=np.int64,
            ),
            timestamp_s=np.array([kill.occurred_at.timestamp() for _, kill in kills]),
            memory_request_bytes=np.array(
                [float(kill.memory_request_bytes) for _, kill in kills]
            ),
        )
        for row, _ in kills:
            row.is_fed = True
    stats = feed(group.aggregates, batch, ooms)
    window.counts["samples"] += stats.cpu_accepted + stats.memory_accepted
    window.counts["samples_dropped"] += stats.cpu_dropped + stats.memory_dropped
    window.counts["oom_kills_accepted"] += stats.oom_accepted
