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
# ``ingest_window`` is the one ingestion step, run on a ``WindowPlan`` (``plan.py``) by
# the minute cycle (``refresh_cluster``), the back-fill (``backfill.py``, one window per
# day) and the chunks of a first contact.

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import math
import time
import weakref
from collections import defaultdict
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from recommender.cluster.base import ClusterAdapter, ClusterSnapshot, OomKill
from recommender.engine.aggregation import AggregateSet
from recommender.engine.usage_hours import HourlyUsage, merged
from recommender.errors import InvalidInput, NotFound
from recommender.models import (
    Checkpoint,
    Cluster,
    Recommendation,
    RefreshRun,
)
from recommender.models import (
    OomKill as OomKillRow,
)
from recommender.models.bulk import (
    CAS_BATCH,
    add_usage_hours,
    compare_and_swap,
    insert_new,
    insert_pointed,
)
from recommender.services.admission import counters
from recommender.services.connections import (
    close_quietly,
    cluster_adapter_for,
    usage_source_for,
)
from recommender.services.operations.runs import Phases, recorded_run
from recommender.services.readmodels import changes
from recommender.services.readmodels import upkeep as readmodels
from recommender.services.readmodels.generation import (
    mark_admission_data_changed,
    note_admission_changes,
)
from recommender.services.refresh import (
    chunking,
    ingest,
    ooms,
    throttling,
    warm_state,
)
from recommender.services.refresh.discovery import Discovery, upsert_discovery
from recommender.services.refresh.ingest import Group, Row, Window
from recommender.services.refresh.node_pools import node_inventory, store_node_pools
from recommender.services.refresh.node_prices import price_workloads
from recommender.services.refresh.ooms import SharedKillLookup
from recommender.services.refresh.plan import (
    CheckpointChoice,
    CheckpointSchedule,
    WindowPlan,
    choose_checkpoints,
    waits_for_history,
)
from recommender.services.refresh.pods import record_running_hours
from recommender.services.refresh.recommend import (
    build_explanations,
    recommend_window,
)
from recommender.sources.base import UsageGrid, UsageSource

logger = logging.getLogger(__name__)

# The progress of a cycle's windows is stored at most this often (a statement each).
PROGRESS_EVERY_S = 5.0
# Changed recommendations stored a slice at a time (an insert and a pointer
# compare-and-swap each): what the store holds at once whatever moved.
RECOMMENDATION_SLICE = 5_000
# How often what refreshes left alive is collected in full (cyclic_gc_paused): the
# reference cycles among it (about 650 objects a cycle at 100,000 containers) wait
# at most this long; a full collection at that size takes about 1.4 s.
FULL_COLLECTION_EVERY_S = 3600.0
_full_collection_at = time.monotonic()

__all__ = [
    "ingest_fleet",
    "ingest_window",
    "refresh_cluster",
]


def ingest_window(
    *,
    discovery: Discovery,
    source: UsageSource,
    plan: WindowPlan,
    run: RefreshRun | None = None,
    phases: Phases | None = None,
    shared: SharedReads | None = None,
    pending: list[Window] | None = None,
) -> dict[str, Any]:
    """Ingest every discovered container from its watermark up to ``plan.end`` and
    commit; return the window's counts. A failure stores nothing of the window.
    ``shared``: what the cycle's windows read once (their rows, the OOM history).
    ``pending``: the window is not stored but added to it, for one store of the
    cycle's windows (``_store``); the counts returned are then those before it.

    Named steps, as upstream's RunOnce: load the rows (``ingest.load_rows``), the OOM
    kills not stored yet (``ooms.py``), the usage after each watermark (a first
    contact reads ``plan.history_s`` back) with the CFS counters the recommend step
    needs (``throttling.py``), all fed to the engine in time order; forget the pods
    gone (``plan.live_pods``: upstream's DeleteRemovedPods); recommend
    (``plan.recommend``); store the checkpoints ``plan.checkpoints`` picks (moving
    their watermarks to the window's end), the OOM kills and the changed
    recommendations in one transaction.
    """
    phases = phases or Phases()
    window = Window(
        discovery=discovery,
        end_s=plan.end_s,
        history_s=plan.history_s,
        keep_state=plan.keeps_engine_rows,
        settle_s=plan.settle_s,
        history_wait_s=plan.history_wait_s,
        loaded=None if shared is None else shared.rows,
    )
    with phases("ingest"):
        ingest.load_rows(window)
        start_s = ingest.start_s(window)
        if start_s is not None:
            _load_ooms(window, source, plan, start_s, shared)
            _read_and_feed(window, source, start_s, run)
            if plan.settle_s:
                ingest.count_late(window)
            if plan.recommend:
                throttling.attach_throttling(window, source)
        if plan.live_pods is not None:
            _forget_gone_pods(window, plan.live_pods)
    if plan.recommend:
        with phases("recommend"):
            # Only the rows whose values moved get a recommendation: a window held
            # for the cycle's store holds no others.
            recommend_window(window)
    if pending is not None:
        pending.append(window)
        return _counts_of(window)
    with phases("store"):
        stored = _store([window], plan.checkpoints)
    return {**_counts_of(window), **stored}


def _counts_of(window: Window) -> dict[str, Any]:
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
    plan: WindowPlan,
    chunk_containers: int | None = None,
    run: RefreshRun | None = None,
    phases: Phases | None = None,
) -> dict[str, Any]:
    """:func:`ingest_window` of the discovered fleet, first contacts in chunks.

    The workloads met for the first time (or every one: ``plan.chunks_every_workload``)
    go in chunks of about ``chunk_containers`` containers
    (``VPAWEB_FIRST_CONTACT_CHUNK_CONTAINERS``), one committed window each
    (``WindowPlan.first_contact_chunk``), after one window of ``plan`` for the others;
    so the memory of a first contact does not grow with the fleet (``chunking.py``).
    A source that cannot read chosen workloads, or a fleet within one chunk, is one
    window. Returns the windows' counts added up.
    """
    if chunk_containers is None:
        chunk_containers = int(settings.FIRST_CONTACT_CHUNK_CONTAINERS)
    if not plan.chunks_every_workload:
        # With a broker, first contacts may go to shard tasks (chunking.py).
        discovery = chunking.defer_first_contact(discovery)
    parts: list[list[int]] = []
    if chunk_containers > 0 and source.selects_workloads:
        chosen = (
            set(discovery.spec_names)
            if plan.chunks_every_workload
            else chunking.fresh_workloads(discovery)
        )
        parts = chunking.plan(discovery, chosen, chunk_containers)
    if len(parts) <= 1:
        parts = []
    in_parts = {w for part in parts for w in part}
    rest = [w for w in discovery.spec_names if w not in in_parts]
    # A large cluster's steady workloads in windows by namespace (chunking.py).
    steady = chunking.steady_windows(discovery, rest) if rest else []
    if not parts and len(steady) <= 1:
        # One window (an empty one still counts zeros and stores the kills).
        return ingest_window(
            discovery=steady[0] if steady else discovery,
            source=source,
            plan=plan,
            run=run,
            phases=phases,
        )
    # Each steady window gets the pod statuses' kills of its own namespaces, split
    # once: every window looking through every kill of the cluster cost a fleet in
    # windows as many passes over them.
    steady_kills = chunking.kills_by_window(discovery, plan.snapshot_kills, steady)
    windows = [
        (part, plan.with_kills(kills))
        for part, kills in zip(steady, steady_kills, strict=True)
    ] + [
        (chunking.restrict(discovery, part), plan.first_contact_chunk(kills))
        for part, kills in zip(
            parts,
            chunking.kills_by_part(discovery, plan.snapshot_kills, parts),
            strict=True,
        )
    ]
    total: dict[str, Any] = {}
    # The steady windows share one read of their rows and of the OOM history.
    shared = None
    if len(steady) > 1:
        with phases("ingest") if phases is not None else contextlib.nullcontext():
            shared = SharedReads.of(
                discovery, windows=steady, snapshot_kills=plan.snapshot_kills
            )
    shown_at = time.monotonic()
    # The steady windows are stored together after the last of them: one statement
    # of each kind a cycle instead of one a window (their engine rows are kept from
    # one cycle to the next anyway; a recommendation that did not move is dropped).
    pending: list[Window] | None = [] if shared is not None else None
    with warm_state.one_pass((discovery.cluster.pk, discovery.namespace)):
        for number, (window, window_plan) in enumerate(windows):
            is_steady = number < len(steady)
            counts = ingest_window(
                discovery=window,
                source=source,
                plan=window_plan,
                phases=phases,
                shared=shared if is_steady else None,
                pending=pending if is_steady else None,
            )
            chunking.add_counts(total, counts)
            if pending and number == len(steady) - 1:
                with (
                    phases("store") if phases is not None else contextlib.nullcontext()
                ):
                    chunking.add_counts(total, _store(pending, plan.checkpoints))
                pending.clear()
            # The progress shown, at most every PROGRESS_EVERY_S (a statement); the
            # last window's is the finished run's, written with its counts.
            if (
                run is not None
                and number + 1 < len(windows)
                and time.monotonic() - shown_at >= PROGRESS_EVERY_S
            ):
                shown_at = time.monotonic()
                RefreshRun.objects.filter(pk=run.pk).update(
                    progress=(number + 1) / len(windows)
                )
    if parts:
        total["first_contact_chunks"] = len(parts)
    if len(steady) > 1:
        total["steady_windows"] = len(steady)
    return total


@dataclass
class SharedReads:
    """What the windows of one cycle read once instead of once each: their rows
    (``ingest.read_rows``, taken out window by window), the source's OOM
    history (``ooms.SharedHistory``) and the stored kills they look up
    (``ooms.SharedKillLookup``)."""

    discovery: Discovery
    rows: dict[int, list[ingest.LoadedRow]]
    ooms: ooms.SharedHistory
    # Each workload's namespace (by id): a window's namespaces without a pass over
    # every workload of the cluster.
    namespace_of: dict[int, str]
    # The pod statuses' kills of the whole cycle (each window has its own share).
    snapshot_kills: Sequence[OomKill]
    # The scope of the window of each namespace that has one of its own (the others
    # are in the window of the cycle's scope): whose known stored kills apply.
    scopes: dict[str, warm_state.Scope]
    kill_lookup: SharedKillLookup = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        # Through a weak reference: the lookup holding this object's bound method
        # made the object part of a reference cycle, and all it holds (720,000
        # objects at 100,000 containers) garbage only the cyclic collector frees.
        candidates = weakref.WeakMethod(self._kill_candidates)

        def of(window: Window) -> tuple[set[int], datetime | None] | None:
            method = candidates()
            return None if method is None else method(window)

        self.kill_lookup = SharedKillLookup(of)

    @classmethod
    def of(
        cls,
        discovery: Discovery,
        *,
        windows: Sequence[Discovery] = (),
        snapshot_kills: Sequence[OomKill] = (),
    ) -> SharedReads:
        """The reads of ``discovery``'s ``windows`` (its rows read now)."""
        return cls(
            discovery=discovery,
            rows=ingest.read_rows(discovery),
            ooms=ooms.SharedHistory(discovery.namespace),
            namespace_of={w: key[0] for key, w in discovery.workload_by_key.items()},
            snapshot_kills=snapshot_kills,
            scopes={
                w.namespace: (w.cluster.pk, w.namespace)
                for w in windows
                if w.namespace is not None and w.namespace != discovery.namespace
            },
        )

    def _kill_candidates(
        self, window: Window
    ) -> tuple[set[int], datetime | None] | None:
        """The containers of the windows not run yet that a kill not known stored
        may be of (the history read so far and the cycle's pod statuses), and the
        time the lookup of their stored kills starts after (``ooms.attach_ooms``'s,
        the oldest of those kills'); None in a process that knows no kill stored
        (each window reads its own)."""
        if not window.keep_state:
            return None
        cycle_scope = (self.discovery.cluster.pk, self.discovery.namespace)
        known_of = {
            scope: warm_state.stored_kills(scope)
            for scope in {cycle_scope, *self.scopes.values()}
        }
        if not any(known_of.values()):
            return None
        ids: set[int] = set()
        oldest: datetime | None = None
        step = timedelta(seconds=ingest.STEP_S)
        end_s = window.settled_end_s
        for kills in (self.ooms.read_kills(), self.snapshot_kills):
            for kill in kills:
                # As attach_ooms skips them: after the window, or known stored by
                # the scope of the window that takes the kill.
                known = known_of[self.scopes.get(kill.namespace, cycle_scope)]
                if kill.occurred_at.timestamp() > end_s or (
                    (kill.namespace, kill.pod, kill.container, kill.occurred_at)
                    in known
                ):
                    continue
                workload_id = self.discovery.owner_of(
                    kill.namespace,
                    kill.pod,
                    kind=kill.workload_kind,
                    name=kill.workload_name,
                )
                for row in self.rows.get(workload_id, ()) if workload_id else ():
                    if row.name == kill.container:
                        ids.add(row.pk)
                        since = kill.occurred_at - step
                        oldest = since if oldest is None else min(oldest, since)
        return ids, oldest

    def namespaces(self, window: Window) -> set[str]:
        """The namespaces of ``window``'s workloads."""
        return {
            self.namespace_of[w]
            for w in window.discovery.spec_names
            if w in self.namespace_of
        }


def _load_ooms(
    window: Window,
    source: UsageSource,
    plan: WindowPlan,
    start_s: float,
    shared: SharedReads | None = None,
) -> None:
    """Give the rows the OOM kills up to the window's end not stored yet: the
    source's history (when it keeps one) merged with the pod statuses'."""
    if shared is None:
        history = ooms.oom_history(
            source,
            namespace=window.discovery.namespace,
            start_s=start_s,
            end_s=plan.end_s,
        )
    else:
        history = shared.ooms.kills(
            source,
            namespaces=shared.namespaces(window),
            start_s=start_s,
            end_s=plan.end_s,
        )
    if source.keeps_oom_history and start_s < plan.end_s:
        # Asked: 1 when the source has no OOM series (cluster page).
        window.counts["oom_history_missing"] = int(history is None)
    ooms.attach_ooms(
        window,
        snapshot_kills=plan.snapshot_kills,
        history=history,
        lookup=None if shared is None else shared.kill_lookup,
    )


def _read_and_feed(
    window: Window, source: UsageSource, start_s: float, run: RefreshRun | None
) -> None:
    """Read usage one day at a time from ``start_s`` and feed it, OOMs in time order.

    A window that settles late samples takes its rows' checkpoints at its settled end
    (``ingest.take_settled``) before it feeds the minutes after it, which the next
    window reads again."""
    settled_end_s = window.settled_end_s
    settled = ingest.chunks(start_s, settled_end_s)
    tail = ingest.chunks(max(start_s, settled_end_s), window.end_s)
    pieces = settled + tail
    if not settled:
        # Nothing new to read, but kills not stored yet must still enter the engine.
        ingest.feed_chunk(
            window, UsageGrid.empty(), settled_end_s, settled_end_s, is_first=True
        )
    for number, (chunk_start, chunk_end) in enumerate(pieces):
        if number == len(settled):
            ingest.take_settled(window)
        grid = ingest.read_usage(
            source,
            namespace=window.discovery.namespace,
            start_s=chunk_start,
            end_s=chunk_end,
            workloads=window.discovery.chunk_keys,
        )
        ingest.feed_chunk(
            window, grid, chunk_start, chunk_end, is_first=number == 0 and bool(settled)
        )
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
        # With a broker, namespaces new to a whole-cluster pass go to shard tasks.
        stored = chunking.defer_new_namespaces(cluster, snapshot, namespace)
        discovery = upsert_discovery(
            cluster=cluster, snapshot=stored, now=now, namespace=namespace
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
        phases = recorder.phases
        # Closing over phases, not the recorder, which holds the function: no
        # reference cycle.
        recorder.describe_failure = lambda message: (
            f"{phases.current} failed: {message}. Stored recommendations and "
            "checkpoints are unchanged; the next cycle starts again from them."
        )
        adapter: ClusterAdapter | None = None
        source: UsageSource | None = None
        # The read models (namespaces' totals, the hour's savings snapshot), once.
        with readmodels.kept_current(
            cluster, now=now, namespace=namespace, phases=phases
        ):
            try:
                # A shard lists only its namespace (docs/refresh.md, "Shards").
                adapter = cluster_adapter_for(
                    cluster, now=now, namespace=namespace, flush_admissions=False
                )
                source = usage_source_for(cluster)
                snapshot, discovery = discover_and_store(
                    cluster, adapter, now=now, namespace=namespace, phases=phases
                )
                # The workloads' prices, from the nodes their pods run on; with a
                # price table, from the nodes as listed (instance types, labels, the
                # pods on them), which the node pools then read too.
                with phases("pricing"):
                    inventory = (
                        node_inventory(
                            adapter=adapter,
                            source=source,
                            snapshot=snapshot,
                            at_s=now.timestamp(),
                        )
                        if settings.PRICE_TABLE
                        else None
                    )
                    discovery.counts["prices_changed"] = price_workloads(
                        pod_nodes=discovery.pod_nodes,
                        source=source,
                        now=now,
                        inventory=inventory,
                        pod_owner=discovery.pod_owner,
                    )
                counts = ingest_fleet(
                    discovery=discovery,
                    source=source,
                    plan=WindowPlan.minute_cycle(
                        now=now,
                        history_s=ingest.history_days(cluster) * 86400.0,
                        snapshot_kills=snapshot.oom_kills,
                        live_pods=_live_pods(discovery),
                        source_keeps_history=source.keeps_history,
                        source_history_arrives_late=source.history_arrives_late,
                    ),
                    run=recorder.run,
                    phases=phases,
                )
                # Batch workloads' running hours again, now that a first contact's
                # back-filled usage hours are stored (pods.record_running_hours); a
                # pass that stored no history went by the hours discovery counted.
                if counts.get("histories_stored"):
                    counts["batch_hours_changed"] = discovery.counts.get(
                        "batch_hours_changed", 0
                    ) + record_running_hours(
                        cluster_id=cluster.pk, namespace=namespace, now=now
                    )
                # With a broker, the shard tasks of the first contacts it left start
                # now, beside this pass's node pools and totals (chunking.py).
                chunking.hand_out_deferred()
                if namespace is None:  # a pool's pods span namespaces
                    with phases("node_pools"):
                        counts["node_pools"] = store_node_pools(
                            cluster,
                            adapter=adapter,
                            source=source,
                            snapshot=snapshot,
                            pod_owner=discovery.pod_owner,
                            now=now,
                            inventory=inventory,
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
    return recorder.run


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, as it was after; what
    the block left alive frozen out of later collections (``gc.freeze``), or once
    every ``FULL_COLLECTION_EVERY_S`` collected in full instead.

    A cycle allocates a few objects per container (rows read, rows compared, engine
    rows) and frees them by reference counting; the collector walked them again and
    again as they piled up: about a third of a steady cycle at 10,000 containers
    (docs/refresh.md, "How the cycle scales"). What a cycle keeps (the engine rows
    of the next, 1.8 million objects at 100,000 containers) the first collection
    after the block walked: 0.6-0.75 s of each steady cycle.
    """
    global _full_collection_at
    was_enabled = gc.isenabled()
    gc.disable()
    failed = False
    try:
        yield
    except BaseException:
        # What a failed block leaves is not frozen: its traceback holds the block's
        # frames, often in a reference cycle, which the collector frees once the
        # error is handled (frozen, a failing cycle a minute would pile up an hour's).
        failed = True
        raise
    finally:
        if was_enabled:
            now_s = time.monotonic()
            if now_s - _full_collection_at >= FULL_COLLECTION_EVERY_S:
                gc.unfreeze()
                gc.collect()
                _full_collection_at = now_s
            elif not failed:
                gc.freeze()
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


def _store(
    windows: Sequence[Window], schedule: CheckpointSchedule | None = None
) -> dict[str, int]:
    """The store step of one window, or of a cycle's steady windows at once (one
    plan: one end, one settling): in one transaction, the checkpoints ``schedule``
    picks (``plan.choose_checkpoints``; compare-and-swap, in bulk: those due now of
    every window in one statement per ``CAS_BATCH``), the OOM kills of those this
    writer won, their usage hours and the changed recommendations (a statement each,
    not one per window); then, once committed, the engine rows the next window of
    this process may go on from. Returns the store's counts."""
    first = windows[0]
    now = first.now
    # The checkpoint budget runs from the start of the store phase.
    deadline = time.monotonic() + (schedule.timeout_s if schedule else math.inf)
    end_at = datetime.fromtimestamp(first.settled_end_s, tz=UTC)
    read_through = (
        datetime.fromtimestamp(first.end_s, tz=UTC) if first.settle_s else None
    )
    counts = dict.fromkeys(
        ("checkpoints_written", "checkpoint_conflicts", "checkpoints_deferred"), 0
    )
    histories = 0
    # (window, group, pks chosen, pks won) of every group
    stored: list[tuple[Window, Group, set[int], set[int]]] = []
    with transaction.atomic():
        choices = [
            (
                window,
                group,
                choose_checkpoints(
                    group.rows,
                    end_at=end_at,
                    now=now,
                    schedule=schedule,
                    batch=CAS_BATCH,
                    history_wait_s=window.history_wait_s,
                ),
            )
            for window in windows
            for group in window.groups.values()
        ]
        won_now = _write_checkpoints(
            [(group.aggregates, list(choice.now)) for _, group, choice in choices],
            end_at,
            now,
            read_through,
        )
        won_rows: list[tuple[Window, list[Row]]] = []
        for window, group, choice in choices:
            chosen, won = _write_due(
                group,
                choice,
                won_now,
                end_at=end_at,
                now=now,
                deadline=deadline,
                read_through=read_through,
            )
            counts["checkpoints_written"] += len(won)
            counts["checkpoint_conflicts"] += len(chosen) - len(won)
            counts["checkpoints_deferred"] += choice.behind - len(chosen)
            # First contacts whose history this writer stored (their usage hours too).
            histories += sum(
                1
                for row in chosen
                if row.checkpoint.pk in won
                and row.checkpoint.last_sample_at is None
                and row.is_fed
            )
            stored.append((window, group, {r.checkpoint.pk for r in chosen}, won))
            won_rows.append((window, [r for r in chosen if r.checkpoint.pk in won]))
        _store_kills(won_rows)
        pending = _store_usage(
            windows, set().union(*(won for _, _, _, won in stored)), counts
        )
        counts["recommendations_changed"] = _store_recommendations(
            [
                row
                for window in windows
                for group in window.groups.values()
                for row in group.rows
            ],
            now,
            first.discovery.cluster.pk,
        )
    for window in windows:
        kept = [
            one
            for held, group, chosen_pks, won in stored
            if held is window
            for one in _kept_rows(window, group, chosen_pks, won, pending)
            # A row waiting for its history is read again from the source, not
            # resumed.
            if not waits_for_history(group.rows[one[1].row], now, window.history_wait_s)
        ]
        if window.keep_state:
            # Stored: the next window of this process may go on from these rows.
            warm_state.keep(kept, scope=window.scope)
            warm_state.keep_stored_kills(window.stored_kills, scope=window.scope)
    counts["histories_stored"] = histories
    return counts


def _write_due(
    group: Group,
    choice: CheckpointChoice,
    won_now: set[int],
    *,
    end_at: datetime,
    now: datetime,
    deadline: float,
    read_through: datetime | None,
) -> tuple[list[Row], set[int]]:
    """After the checkpoints of ``choice.now`` (written already, ``won_now`` the pks
    this writer won of them), the group's due batches a statement at a time, the
    clock read between them, until ``deadline`` (the first always), so the budget
    holds however many rows one group has. Returns the rows written and the pks
    this writer won."""
    chosen = list(choice.now)
    won = {row.checkpoint.pk for row in chosen} & won_now
    for number, batch in enumerate(choice.due):
        if number and time.monotonic() > deadline:
            break
        won |= _write_checkpoints(
            [(group.aggregates, batch)], end_at, now, read_through
        )
        chosen += batch
    return chosen, won


_KILL_COLUMNS = (
    "container",
    "pod",
    "occurred_at",
    "memory_request_bytes",
    "is_eviction",
)


def _store_kills(won: Sequence[tuple[Window, Sequence[Row]]]) -> None:
    """The OOM kills of each window's rows whose checkpoints this writer stored,
    each once, in one statement per 2,000 (bulk.py), a kill stored already skipped."""
    kills = [
        (window, row, kill) for window, rows in won for row in rows for kill in row.ooms
    ]
    insert_new(
        [
            OomKillRow(
                container_id=row.container.pk,
                pod=kill.pod,
                occurred_at=kill.occurred_at,
                memory_request_bytes=kill.memory_request_bytes,
                is_eviction=kill.is_eviction,
            )
            for _, row, kill in kills
        ],
        fields=_KILL_COLUMNS,
    )
    changes.note(row.container.workload_id for _, row, _ in kills)
    for window, _, kill in kills:
        window.stored_kills.add(ooms.kill_key(kill))


def _store_usage(
    windows: Sequence[Window], won: set[int], counts: dict[str, int]
) -> HourlyUsage | None:
    """Add the usage hours of the checkpoints this writer won (``won``: their pks) to
    the stored hours, in one statement: the hours hold the samples the stored
    checkpoints do, each once. Returns the hours of the others, pending until their
    checkpoints are written (None: none)."""
    usage = merged([part for window in windows for part in window.usage])
    if not len(usage):
        return None
    written = np.array(
        [
            row.container.pk
            for window in windows
            for row in window.rows_by_container.values()
            if row.checkpoint.pk in won
        ],
        dtype=np.int64,
    )
    is_written = np.isin(usage.key, written)
    counts["usage_hours_written"] = add_usage_hours(usage.select(is_written))
    return usage.select(~is_written) if not is_written.all() else None


def _kept_rows(
    window: Window,
    group: Group,
    chosen: set[int],
    won: set[int],
    pending: HourlyUsage | None,
) -> list[tuple[int, warm_state.Kept]]:
    """The group's rows as the next window may take them (``warm_state``): a written
    checkpoint's version moved on by one, a deferred one's did not (with the usage
    hours ``pending`` since its watermark); a lost compare-and-swap keeps nothing
    (the winner's state stands)."""
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
                    usage=pending,
                ),
            )
        )
    return out


def _write_checkpoints(
    parts: Sequence[tuple[AggregateSet | None, Sequence[Row]]],
    end_at: datetime,
    now: datetime,
    read_through: datetime | None = None,
) -> set[int]:
    """Compare-and-swap the checkpoints of each part's rows (their engine rows in its
    AggregateSet), all in one statement per ``CAS_BATCH``; the pks this writer won.
    With ``read_through`` (a window that settles late samples: the end it read to),
    their settled states, and what was read after the watermark
    (``unsettled_samples``)."""
    cas_rows = []
    rows_written: list[Row] = []
    for aggregates, rows in parts:
        if not rows:
            continue
        assert aggregates is not None
        rows_written += rows
        states = [r.settled for r in rows if r.settled is not None]
        if len(states) < len(rows):
            counts = aggregates.sample_count()
            states = [
                (blob, int(counts[row.index]))
                for row, blob in zip(
                    rows,
                    aggregates.to_checkpoints([r.index for r in rows]),
                    strict=True,
                )
            ]
        for row, (blob, sample_count) in zip(rows, states, strict=True):
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
                        "sample_count": sample_count,
                        "updated_at": now,
                        **(
                            {}
                            if read_through is None
                            else {
                                "read_through_at": read_through,
                                "unsettled_samples": row.unsettled_samples,
                            }
                        ),
                    },
                )
            )
    if not cas_rows:
        return set()
    won = compare_and_swap(
        Checkpoint, expect="version", rows=cas_rows, increment="version"
    )
    for row in rows_written:
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


def _store_moved(moved: Sequence[Row], now: datetime) -> set[int]:
    """New Recommendation rows of ``moved`` and the compare-and-swap of their
    containers' pointers (one statement on PostgreSQL: ``bulk.insert_pointed``); a
    container a concurrent cycle moved meanwhile gets no row. Returns the container
    pks this writer won."""
    explanations = build_explanations(
        [row.recommendation["explanation"] for row in moved]  # type: ignore[index]
    )
    new = []
    for row, explanation in zip(moved, explanations, strict=True):
        values = row.recommendation["values"]  # type: ignore[index]
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
        row.recommendation = None  # stored below: its explanation is let go
    for rec in new:
        rec.fill_explanation_columns()  # the bulk insert skips save()
    won = insert_pointed(
        new,
        fields=_RECOMMENDATION_COLUMNS,
        owner="container",
        pointer="latest_recommendation",
        expected={
            row.container.pk: row.container.latest_recommendation_id for row in moved
        },
    )
    for row, rec in zip(moved, new, strict=True):
        if row.container.pk in won:
            row.container.latest_recommendation_id = rec.pk
            row.container.latest_values = rec.values_tuple()
    return won


def _store_recommendations(rows: Sequence[Row], now: datetime, cluster_id: int) -> int:
    """A new Recommendation row for each row whose values moved (explanations built
    for those only), then the compare-and-swap of each container's pointer: a
    concurrent cycle that already moved it wins; the webhook's journal gets their
    workloads. Returns how many were stored. A row whose values did not move has
    no recommendation (``recommend_window``)."""
    moved = [row for row in rows if row.recommendation is not None]
    if not moved:
        return 0
    won: set[int] = set()
    # A slice at a time: its explanations built, its rows inserted (each about
    # 2.5 KB of explanation: a 12 MB document) and its pointers swapped, then let go,
    # so what is held does not grow with how many moved at once.
    for start in range(0, len(moved), RECOMMENDATION_SLICE):
        won |= _store_moved(moved[start : start + RECOMMENDATION_SLICE], now)
    moved_workloads = [
        row.container.workload_id for row in moved if row.container.pk in won
    ]
    changes.note(moved_workloads)
    note_admission_changes(cluster_id=cluster_id, workload_ids=moved_workloads)
    return len(won)
