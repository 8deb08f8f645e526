"""First contact in chunks of containers: memory bounded whatever the fleet's size.

A container met for the first time (no watermark: a new fleet, a new workload, an
expired checkpoint) reads its whole history. Done for the whole fleet at once, the
usage grids, the engine state and the rows of every container are in memory together,
which grows with the fleet (gigabytes at thousands of containers). ``plan`` cuts
them into chunks of about ``VPAWEB_FIRST_CONTACT_CHUNK_CONTAINERS`` containers; the
cycle (``cycle.ingest_fleet``) ingests, recommends and stores each chunk as a window of
its own, reading from the source the usage of that chunk's workloads only."""
# A workload is never split (its containers share the pod minimum), and each container's
# result depends only on its own samples and OOM kills, so chunked results equal
# unchunked ones exactly (``tests/services/test_refresh_chunks.py``). Only sources that
# read the usage of chosen workloads (``UsageSource.selects_workloads``: the simulated
# one) are read in chunks; for the others a chunk would read the whole namespace again,
# so their first contact stays one window.
#
# The steady window of a large whole-cluster pass is cut by namespace too
# (``steady_windows``): its working set is that of the largest namespace, not of the
# fleet. With a broker, a whole-cluster refresh leaves its first contacts to one task
# per namespace (``first_contact_by_shard``, ``defer_first_contact``; ``tasks.py``
# queues them), so the Celery workers share them. A namespace it never stored a
# workload of (a new cluster's every namespace) it leaves to its task whole, discovery
# and upsert included (``defer_new_namespaces``): those run in the tasks, in parallel.

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Collection, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from django.conf import settings

from recommender.cluster.base import ClusterSnapshot, OomKill
from recommender.models import Checkpoint, Cluster, Container, Workload
from recommender.services.refresh.discovery import Discovery


@dataclasses.dataclass
class _Deferral:
    """The namespaces whose first contact the running whole-cluster refresh left to
    shard tasks, and who queues them (``hand_out_deferred``)."""

    namespaces: set[str]
    hand_out: Callable[[list[str]], None] | None
    handed_out: bool = False


# None: the running refresh does its first contacts itself.
_DEFERRED: ContextVar[_Deferral | None] = ContextVar(
    "first_contact_deferred", default=None
)


@contextlib.contextmanager
def first_contact_by_shard(
    hand_out: Callable[[list[str]], None] | None = None,
) -> Iterator[set[str]]:
    """Within the block, a whole-cluster refresh ingests only the workloads it met
    before; the namespaces of the others (met for the first time) are added to the
    set yielded, for the caller to refresh as shards, one task each. ``hand_out``
    (when given) gets them, sorted, once the refresh has stored what those tasks
    start from, before its own last steps (``hand_out_deferred``)."""
    deferral = _Deferral(namespaces=set(), hand_out=hand_out)
    token = _DEFERRED.set(deferral)
    try:
        yield deferral.namespaces
    finally:
        _DEFERRED.reset(token)


def hand_out_deferred() -> None:
    """Give the namespaces deferred so far to the block's ``hand_out``, once: the
    whole-cluster refresh calls it after its ingestion, so the shard tasks start
    while it goes on with the cluster's node pools and totals."""
    deferral = _DEFERRED.get()
    if deferral is None or deferral.hand_out is None or deferral.handed_out:
        return
    deferral.handed_out = True
    if deferral.namespaces:
        deferral.hand_out(sorted(deferral.namespaces))


def defer_new_namespaces(
    cluster: Cluster, snapshot: ClusterSnapshot, namespace: str | None
) -> ClusterSnapshot:
    """``snapshot`` without the workloads and VPA objects of the namespaces of which
    no workload is stored yet, when a whole-cluster refresh runs in
    ``first_contact_by_shard``; those namespaces go to its set. Their shard tasks
    discover and store them (and first contact them), side by side, instead of the
    whole-cluster pass, one process, storing every container of a new fleet first.
    Else ``snapshot`` itself."""
    deferral = _DEFERRED.get()
    if deferral is None or namespace is not None:
        return snapshot
    listed = {w.namespace for w in snapshot.workloads}
    stored = set(
        Workload.objects.filter(cluster=cluster, namespace__in=listed)
        .values_list("namespace", flat=True)
        .distinct()
    )
    new = listed - stored
    if not new:
        return snapshot
    deferral.namespaces.update(new)
    return dataclasses.replace(
        snapshot,
        workloads=tuple(w for w in snapshot.workloads if w.namespace not in new),
        vpas=tuple(v for v in snapshot.vpas if v.namespace not in new),
    )


def defer_first_contact(discovery: Discovery) -> Discovery:
    """``discovery`` without its workloads met for the first time, when a
    whole-cluster refresh runs in ``first_contact_by_shard``; their namespaces go to
    its set (with those ``defer_new_namespaces`` put there, counted as
    ``first_contact_shards``). Else ``discovery`` itself."""
    deferral = _DEFERRED.get()
    if deferral is None or discovery.namespace is not None:
        return discovery
    fresh = fresh_workloads(discovery)
    deferral.namespaces.update(
        key[0] for key, w in discovery.workload_by_key.items() if w in fresh
    )
    if deferral.namespaces:
        discovery.counts["first_contact_shards"] = len(deferral.namespaces)
    if not fresh:
        return discovery
    return restrict(discovery, [w for w in discovery.spec_names if w not in fresh])


def steady_windows(
    discovery: Discovery,
    workload_ids: Sequence[int],
    limit: int | None = None,
) -> list[Discovery]:
    """The windows that ingest ``workload_ids`` of ``discovery``: ``discovery`` itself
    (or restricted to them) when it is a shard or they hold at most ``limit``
    containers, else one window per namespace of at least ``limit // 4`` containers
    (a shard's view of it: the source reads that namespace) and one for the rest.
    A workload is never split. ``limit``: VPAWEB_STEADY_WINDOW_CONTAINERS."""
    limit = int(settings.STEADY_WINDOW_CONTAINERS) if limit is None else limit
    whole = (
        [discovery]
        if len(workload_ids) == len(discovery.spec_names)
        else [restrict(discovery, workload_ids)]
    )
    if discovery.namespace is not None or limit <= 0:
        return whole
    namespace_of = {w: key[0] for key, w in discovery.workload_by_key.items()}
    by_namespace: dict[str, list[int]] = {}
    sizes: dict[str, int] = {}
    for workload_id in workload_ids:
        namespace = namespace_of[workload_id]
        by_namespace.setdefault(namespace, []).append(workload_id)
        sizes[namespace] = sizes.get(namespace, 0) + _containers(discovery, workload_id)
    if sum(sizes.values()) <= limit:
        return whole
    large = sorted(ns for ns, size in sizes.items() if size >= limit // 4)
    windows = [
        dataclasses.replace(
            discovery,
            namespace=namespace,
            spec_names={w: discovery.spec_names[w] for w in by_namespace[namespace]},
            chunk_keys=None,
        )
        for namespace in large
    ]
    rest = [
        w for ns, ids in sorted(by_namespace.items()) if ns not in large for w in ids
    ]
    if rest:
        windows.append(restrict(discovery, rest))
    return windows


def _containers(discovery: Discovery, workload_id: int) -> int:
    """The workload's non-init containers (engine rows)."""
    return sum(
        1
        for _name, kind in discovery.spec_names.get(workload_id, ())
        if kind != Container.Kind.INIT
    )


def fresh_workloads(discovery: Discovery) -> set[int]:
    """Discovered workloads with a container whose checkpoint has no watermark (as
    the upsert read them, ``Discovery.fresh``, else read now)."""
    if discovery.fresh is not None:
        return set(discovery.fresh & discovery.spec_names.keys())
    rows = Checkpoint.objects.filter(
        container__workload__cluster=discovery.cluster,
        container__workload__is_active=True,
        last_sample_at__isnull=True,
    )
    if discovery.namespace is not None:
        rows = rows.filter(container__workload__namespace=discovery.namespace)
    found = set(rows.values_list("container__workload_id", flat=True).distinct())
    return found & discovery.spec_names.keys()


def plan(
    discovery: Discovery, workload_ids: Collection[int], chunk_containers: int
) -> list[list[int]]:
    """``workload_ids`` (by id) in chunks of at most ``chunk_containers`` non-init
    containers each; a larger workload is a chunk of its own."""
    chunks: list[list[int]] = []
    current: list[int] = []
    size = 0
    for workload_id in sorted(workload_ids):
        count = _containers(discovery, workload_id)
        if current and size + count > chunk_containers:
            chunks.append(current)
            current, size = [], 0
        current.append(workload_id)
        size += count
    if current:
        chunks.append(current)
    return chunks


def kills_by_part(
    discovery: Discovery, kills: Sequence[OomKill], parts: Sequence[Sequence[int]]
) -> list[tuple[OomKill, ...]]:
    """``kills`` of each part's workloads, in their order: a chunk's window finds a
    row for no other (a kill whose workload discovery does not name, found by its pod,
    goes to every part). Split once, not looked up again by every chunk."""
    part_of = {w: number for number, part in enumerate(parts) for w in part}
    out: list[list[OomKill]] = [[] for _ in parts]
    for kill in kills:
        owner = (
            discovery.workload_by_key.get(
                (kill.namespace, kill.workload_kind, kill.workload_name)
            )
            if kill.workload_kind and kill.workload_name
            else None
        )
        if owner is None:
            for part in out:
                part.append(kill)
        elif (number := part_of.get(owner)) is not None:
            out[number].append(kill)
    return [tuple(part) for part in out]


def kills_by_window(
    discovery: Discovery, kills: Sequence[OomKill], windows: Sequence[Discovery]
) -> list[tuple[OomKill, ...]]:
    """``kills`` of each steady window (``steady_windows``), in their order: by the
    kill's namespace, which is its pod's and so its workload's, and which lies in one
    window only. Split once, not looked through again by every window."""
    namespace_of = {w: key[0] for key, w in discovery.workload_by_key.items()}
    window_of = {
        namespace_of[w]: number
        for number, window in enumerate(windows)
        for w in window.spec_names
        if w in namespace_of
    }
    out: list[list[OomKill]] = [[] for _ in windows]
    for kill in kills:
        if (number := window_of.get(kill.namespace)) is not None:
            out[number].append(kill)
    return [tuple(part) for part in out]


def restrict(discovery: Discovery, workload_ids: Sequence[int]) -> Discovery:
    """``discovery`` seen as holding ``workload_ids`` only: the window of one chunk.

    Its ``chunk_keys`` tell the source which workloads to read.
    """
    wanted = set(workload_ids)
    return dataclasses.replace(
        discovery,
        spec_names={w: discovery.spec_names[w] for w in workload_ids},
        chunk_keys=frozenset(
            key for key, w in discovery.workload_by_key.items() if w in wanted
        ),
    )


def add_counts(total: dict[str, Any], part: dict[str, Any]) -> None:
    """Add the counts of one chunk's window to the cycle's."""
    for name, value in part.items():
        if name == "error_samples":
            total[name] = (total.get(name, []) + list(value))[:5]
        elif name == "series_unmatched":
            total[name] = max(total.get(name, 0), value)
        elif isinstance(value, int | float):
            total[name] = total.get(name, 0) + value
        else:
            total[name] = value
