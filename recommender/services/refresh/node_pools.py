"""Nodes each node pool could free: its pods packed onto its real nodes by their
requests now and at the recommendations (``engine.binpack``), priced at the pool's
node prices, or why the pool cannot be modelled. The plan is packed again only when
its inputs changed (the nodes, the pods and their requests, the recommendations, the
DaemonSets' placement, the prices), read at most every ``NODE_POOLS_INTERVAL_S``.
Definitions: docs/dashboard.md, "Nodes you can free".
"""
# The nodes come from the adapter's ``list_nodes`` (the API server's Node objects, or
# the simulated layout), else from kube-state-metrics' series when the API server
# does not list them (the read role lacks ``list nodes``); the pods on them from
# kube-state-metrics when the usage source reads it, else from the adapter. Each node
# offers its allocatable less the DaemonSets it runs: those with a pod on it, and
# those whose placement (nodeSelector, required node affinity, tolerations against
# its taints) selects it. Cordoned nodes take no pod. A pod's request is the sum of its
# containers' (init containers left out).

from __future__ import annotations

import hashlib
import logging
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import numpy as np
from django.conf import settings
from django.db import transaction

from recommender.cluster.base import ClusterAdapter, ClusterSnapshot
from recommender.cluster.nodes import (
    FALLBACK_POOL_LABELS,
    FROM_API_SERVER,
    KSM_METRICS,
    NodeInventory,
    NodeRecord,
    PodRequests,
    inventory_from_ksm,
    pool_of,
)
from recommender.cluster.scheduling import NodePlacement, Taint
from recommender.engine.binpack import (
    NodeRoom,
    NodeShape,
    fits_a_node,
    largest,
    pack_onto,
)
from recommender.models import Cluster, Container, NodePool
from recommender.models.provisioning import HOURS_PER_MONTH
from recommender.services.refresh.node_prices import (
    node_facts,
    node_prices,
    price_table,
)
from recommender.sources.base import UsageSource

logger = logging.getLogger(__name__)

GIB = 2**30
# (namespace, pod) -> container -> targets (cpu millicores, memory bytes); None: none
Targets = Mapping[str, tuple[int | None, int | None]]
Requests = Mapping[tuple[str, str], Targets]
# (namespace, DaemonSet name) -> its hard placement rules
Placements = Mapping[tuple[str, str], NodePlacement]


@dataclass(frozen=True)
class PoolPlan:
    """One pool's packing. ``cannot_model`` says why no count of nodes freed can be
    given ("" when it can); ``placed_*`` + ``unplaceable_*`` = ``pods``."""

    name: str
    nodes: int
    cordoned: int
    node: NodeShape
    allocatables: tuple[tuple[int, int], ...]
    pods: int
    nodes_needed_now: int
    nodes_needed_after: int
    placed_now: int
    placed_after: int
    unplaceable_now: int
    unplaceable_after: int
    held_after: int = 0
    cannot_model: str = ""

    @property
    def nodes_freed(self) -> int | None:
        """As ``NodePool.nodes_freed``."""
        if self.cannot_model:
            return None
        return max(0, self.nodes_needed_now - self.nodes_needed_after)


def pool_labels() -> tuple[str, ...]:
    """The node labels that name a node's pool, first found wins."""
    return (settings.NODE_POOL_LABEL, *FALLBACK_POOL_LABELS)


def node_inventory(
    *,
    adapter: ClusterAdapter,
    source: UsageSource,
    snapshot: ClusterSnapshot,
    at_s: float,
) -> NodeInventory | None:
    """The cluster's nodes and the pods on them, and where they came from; None
    when neither the adapter nor the usage source knows the nodes."""
    listing = adapter.list_nodes(snapshot)
    labels = pool_labels()
    if listing.nodes:
        nodes = {
            n.name: replace(n, pool=pool_of(n.labels, labels))
            if listing.source == FROM_API_SERVER
            else n
            for n in listing.nodes
        }
        if source.reads_cluster_series:
            samples = source.instant_samples(KSM_METRICS, at_s=at_s)
            pods = inventory_from_ksm(samples, pool_labels=labels, nodes=nodes).pods
            return NodeInventory(nodes, pods, source=listing.source)
        if listing.pods is not None:
            pods = tuple(p for p in listing.pods if p.node in nodes)
            return NodeInventory(nodes, pods, source=listing.source)
        return NodeInventory(
            nodes,
            (),
            source=listing.source,
            unknown_pods="vpaweb reads only some namespaces of this cluster and has "
            "no kube-state-metrics: the pods of the others on its nodes are unknown",
        )
    why = listing.problem or "the API server lists no nodes"
    if source.reads_cluster_series:
        samples = source.instant_samples(KSM_METRICS, at_s=at_s)
        inventory = inventory_from_ksm(samples, pool_labels=labels)
        return replace(inventory, note=f"not from the API server: {why}")
    logger.info("no nodes to pack: %s, and no kube-state-metrics", why)
    return None


def _pod_total(pod: PodRequests, targets: Targets | None) -> tuple[int, int]:
    """The pod's requests summed, each at its target when ``targets`` has one."""
    cpu = memory = 0
    if not targets:
        for c, m in pod.containers.values():
            cpu += c
            memory += m
        return cpu, memory
    for name, (c, m) in pod.containers.items():
        target_cpu, target_memory = targets.get(name, (None, None))
        cpu += c if target_cpu is None else target_cpu
        memory += m if target_memory is None else target_memory
    return cpu, memory


# (id of a pod's containers dict, id of its targets) -> (now, after) totals: the pods
# of one workload share both dicts, so each workload is summed once.
_TotalsCache = dict[tuple[int, int], tuple[tuple[int, int], tuple[int, int]]]


def _totals(
    pod: PodRequests, after: Requests, cache: _TotalsCache
) -> tuple[tuple[int, int], tuple[int, int]]:
    """The pod's requests summed now, and at its targets in ``after``."""
    targets = after.get((pod.namespace, pod.name))
    key = (id(pod.containers), id(targets))
    found = cache.get(key)
    if found is None:
        current = _pod_total(pod, None)
        found = cache[key] = (
            current,
            _pod_total(pod, targets) if targets else current,
        )
    return found


@dataclass
class _Daemon:
    """A DaemonSet: its largest pod now and after (cpu, memory each), the nodes its
    pods run on, its placement when known."""

    now: list[int]
    after: list[int]
    nodes: set[str]
    placement: NodePlacement | None = None


def _daemons(
    pods: Sequence[PodRequests],
    after: Requests,
    placements: Placements,
    cache: _TotalsCache,
) -> dict[tuple[str, str], _Daemon]:
    """The DaemonSets of ``pods`` (DaemonSet pods only)."""
    found: dict[tuple[str, str], _Daemon] = {}
    for pod in pods:
        key = (pod.namespace, pod.owner_name)
        daemon = found.get(key)
        if daemon is None:
            daemon = found[key] = _Daemon([0, 0], [0, 0], set(), placements.get(key))
        current, recommended = _totals(pod, after, cache)
        for i in (0, 1):
            daemon.now[i] = max(daemon.now[i], current[i])
            daemon.after[i] = max(daemon.after[i], recommended[i])
        daemon.nodes.add(pod.node)
    return found


def _charged(
    nodes: Sequence[NodeRecord], daemons: Mapping[tuple[str, str], _Daemon]
) -> list[list[_Daemon]]:
    """The DaemonSets each node runs: those with a pod on it, and those whose
    placement selects it."""
    index = {node.name: i for i, node in enumerate(nodes)}
    charged: list[list[_Daemon]] = [[] for _ in nodes]
    for daemon in daemons.values():
        on = {index[name] for name in daemon.nodes if name in index}
        for i in on:
            charged[i].append(daemon)
        placement = daemon.placement
        if placement is None:
            continue
        # Placement by taints only: decided once per distinct set of taints.
        by_taints: dict[tuple[Taint, ...], bool] = {}
        for i, node in enumerate(nodes):
            if i in on:
                continue
            if placement.needs_labels:
                selected = placement.selects(
                    name=node.name, label=node.label, taints=node.taints
                )
            elif node.taints in by_taints:
                selected = by_taints[node.taints]
            else:
                selected = by_taints[node.taints] = placement.tolerates(node.taints)
            if selected:
                charged[i].append(daemon)
    return charged


def _rooms(
    nodes: Sequence[NodeRecord], charged: Sequence[list[_Daemon]], column: str
) -> NodeRoom:
    """Each node's allocatable less its DaemonSets' pods (``now`` or ``after``)."""
    cpu = np.array([n.cpu_millicores for n in nodes], dtype=np.int64)
    memory = np.array([n.memory_bytes for n in nodes], dtype=np.int64)
    pods = np.array([n.pods for n in nodes], dtype=np.int64)
    for i, daemons in enumerate(charged):
        for daemon in daemons:
            amounts = getattr(daemon, column)
            cpu[i] -= amounts[0]
            memory[i] -= amounts[1]
        pods[i] -= len(daemons)
    return NodeRoom(cpu, memory, pods)


def _most_common(room: NodeRoom) -> int:
    """The index of the first node of the most common room."""
    shapes = list(
        zip(
            room.cpu_millicores.tolist(),
            room.memory_bytes.tolist(),
            room.pods.tolist(),
            strict=True,
        )
    )
    common = Counter(shapes).most_common(1)[0][0]
    return shapes.index(common)


def _shape(room: NodeRoom, index: int) -> NodeShape:
    return NodeShape(
        int(room.cpu_millicores[index]),
        int(room.memory_bytes[index]),
        int(room.pods[index]),
    )


def _plan_pool(
    name: str,
    nodes: list[NodeRecord],
    pod_totals: np.ndarray,
    held: int,
    daemons: Mapping[tuple[str, str], _Daemon],
    grew: bool,
    partial: str,
) -> PoolPlan:
    open_nodes = [n for n in nodes if not n.unschedulable]
    common = Counter((n.cpu_millicores, n.memory_bytes, n.pods) for n in nodes)
    shape = NodeShape(*common.most_common(1)[0][0])
    allocatables = largest((n.cpu_millicores, n.memory_bytes) for n in open_nodes)
    pods = len(pod_totals)
    if not open_nodes:
        return PoolPlan(
            name=name,
            nodes=len(nodes),
            cordoned=len(nodes),
            node=shape,
            allocatables=(),
            pods=pods,
            nodes_needed_now=0,
            nodes_needed_after=0,
            placed_now=0,
            placed_after=0,
            unplaceable_now=pods,
            unplaceable_after=pods,
            held_after=held,
            cannot_model="every node of the pool is cordoned",
        )
    charged = _charged(open_nodes, daemons)
    room_now = _rooms(open_nodes, charged, "now")
    room_after = _rooms(open_nodes, charged, "after")
    # Roomiest nodes first (the same order now and after); spare nodes, when the
    # pool's run out, are like its most common one.
    order = np.lexsort(
        (
            np.arange(len(open_nodes)),
            -room_now.memory_bytes,
            -room_now.cpu_millicores,
        )
    )
    room_now, room_after = (
        NodeRoom(r.cpu_millicores[order], r.memory_bytes[order], r.pods[order])
        for r in (room_now, room_after)
    )
    spare = _most_common(room_now)
    now = pack_onto(
        pod_totals[:, 0], pod_totals[:, 1], room=room_now, spare=_shape(room_now, spare)
    )
    then = pack_onto(
        pod_totals[:, 2],
        pod_totals[:, 3],
        room=room_after,
        spare=_shape(room_after, spare),
    )
    needed_after = then.nodes
    if not grew:
        # No request grows: where every pod runs now, it still fits after.
        needed_after = min(needed_after, now.nodes)
    if partial:
        reason = partial
    elif now.unplaceable:
        reason = (
            f"{now.unplaceable} pods running on the pool fit none of its nodes by "
            "their requests (allocatable less each node's DaemonSets)"
        )
    elif now.nodes > len(open_nodes):
        reason = (
            f"the pods' requests need {now.nodes} nodes by first-fit decreasing but "
            f"run on {len(open_nodes)}: the pool places pods by rules vpaweb does not "
            "model (affinity, topology spread)"
        )
    else:
        reason = ""
    return PoolPlan(
        name=name,
        nodes=len(nodes),
        cordoned=len(nodes) - len(open_nodes),
        node=shape,
        allocatables=allocatables,
        pods=pods,
        nodes_needed_now=now.nodes,
        nodes_needed_after=needed_after,
        placed_now=now.placed,
        placed_after=then.placed,
        unplaceable_now=now.unplaceable,
        unplaceable_after=then.unplaceable,
        held_after=held,
        cannot_model=reason,
    )


def plan_pools(
    inventory: NodeInventory,
    after: Requests,
    placements: Placements | None = None,
) -> list[PoolPlan]:
    """Each pool's nodes needed by its pods' requests now, and with the pods of
    ``after`` at those requests instead (containers not named keep theirs)."""
    pools: dict[str, list[NodeRecord]] = defaultdict(list)
    for node in inventory.nodes.values():
        pools[node.pool].append(node)
    open_nodes = [n for n in inventory.nodes.values() if not n.unschedulable]
    cluster_allocatables = largest(
        (n.cpu_millicores, n.memory_bytes)
        for n in open_nodes or inventory.nodes.values()
    )
    cache: _TotalsCache = {}
    daemons = _daemons(
        [p for p in inventory.pods if p.is_daemon], after, placements or {}, cache
    )
    grew = any(d.after[i] > d.now[i] for d in daemons.values() for i in (0, 1))
    # Per pool: each pod's (now cpu, now memory, after cpu, after memory).
    totals_of: dict[str, list[tuple[int, int, int, int]]] = defaultdict(list)
    held_of: Counter[str] = Counter()
    pool_of_node = {name: node.pool for name, node in inventory.nodes.items()}
    # One answer per distinct recommended total.
    fits_cache: dict[tuple[int, int], bool] = {}
    for pod in inventory.pods:
        if pod.is_daemon:
            continue
        pool = pool_of_node[pod.node]
        current, recommended = _totals(pod, after, cache)
        if recommended != current:
            fits = fits_cache.get(recommended)
            if fits is None:
                fits = fits_cache[recommended] = fits_a_node(
                    cluster_allocatables, *recommended
                )
            if not fits:
                # vpaweb writes no request that fits no node: the pod keeps its own.
                recommended = current
                held_of[pool] += 1
            elif recommended[0] > current[0] or recommended[1] > current[1]:
                grew = True
        totals_of[pool].append((*current, *recommended))
    return [
        _plan_pool(
            name,
            nodes,
            np.array(totals_of[name], dtype=np.int64).reshape(-1, 4),
            held_of[name],
            daemons,
            grew,
            inventory.unknown_pods,
        )
        for name, nodes in sorted(pools.items())
    ]


def recommended_requests(pod_owner: Mapping[tuple[str, str], int]) -> Requests:
    """The latest recommendation's targets of each known pod's containers (a
    resource without a target keeps its request: the pod's, at packing)."""
    by_workload: dict[int, dict[str, tuple[int | None, int | None]]] = defaultdict(dict)
    rows = Container.objects.filter(
        workload_id__in=set(pod_owner.values()),
        latest_recommendation__isnull=False,
    ).values_list(
        "workload_id",
        "name",
        "latest_recommendation__target_cpu_millicores",
        "latest_recommendation__target_memory_bytes",
    )
    for workload_id, name, cpu, memory in rows:
        by_workload[workload_id][name] = (cpu, memory)
    return {
        key: by_workload[workload_id]
        for key, workload_id in pod_owner.items()
        if workload_id in by_workload
    }


def daemon_placements(
    snapshot: ClusterSnapshot,
) -> dict[tuple[str, str], NodePlacement]:
    """The placement of each DaemonSet of the snapshot whose adapter read it."""
    return {
        (w.namespace, w.name): w.placement
        for w in snapshot.workloads
        if w.placement is not None
    }


def _name(node: NodeRecord) -> str:
    return node.name


def inputs_digest(
    inventory: NodeInventory,
    after: Requests,
    placements: Placements,
    prices: Mapping[str, tuple[float, str]],
) -> str:
    """A digest of everything a plan is made from: equal digests, equal plans."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(
        repr((inventory.source, inventory.note, inventory.unknown_pods)).encode()
    )
    digest.update(repr(sorted(prices.items())).encode())
    digest.update(repr(sorted(inventory.nodes.values(), key=_name)).encode())
    # In the source's own order (a fixed one for equal inputs): one string.
    digest.update(
        "\n".join(
            f"{p.namespace}/{p.name}@{p.node}:{p.owner_kind}/{p.owner_name}"
            f"{p.containers!r}{after.get((p.namespace, p.name))!r}"
            for p in inventory.pods
        ).encode()
    )
    digest.update(repr(sorted(placements.items())).encode())
    return digest.hexdigest()


def _pool_prices(
    inventory: NodeInventory, *, source: UsageSource, at_s: float
) -> dict[str, tuple[float, str]]:
    """Each pool's mean monthly price of a node, and the source that priced most
    of its nodes (node_prices.node_prices, as the workloads' pods)."""
    priced = node_prices(
        inventory.nodes,
        node_facts(source=source, at_s=at_s, inventory=inventory),
        price_table(),
    )
    costs: dict[str, list[float]] = defaultdict(list)
    sources: dict[str, Counter[str]] = defaultdict(Counter)
    for node in inventory.nodes.values():
        price = priced[node.name]
        hourly = (
            price.per_core_hour * node.cpu_millicores / 1000.0
            + price.per_gib_hour * node.memory_bytes / GIB
        )
        costs[node.pool].append(hourly * HOURS_PER_MONTH)
        sources[node.pool][price.source] += 1
    return {
        pool: (sum(values) / len(values), sources[pool].most_common(1)[0][0])
        for pool, values in costs.items()
    }


def store_node_pools(
    cluster: Cluster,
    *,
    adapter: ClusterAdapter,
    source: UsageSource,
    snapshot: ClusterSnapshot,
    pod_owner: Mapping[tuple[str, str], int],
    now: datetime,
    inventory: NodeInventory | None = None,
) -> int:
    """Plan and store the cluster's node pools (replacing the stored ones) when the
    stored plan's inputs were last read ``NODE_POOLS_INTERVAL_S`` ago or more and
    have changed since; returns the pools stored (0: the stored plan stands, or no
    source of nodes). ``inventory``: the nodes this cycle already read."""
    stored = (
        NodePool.objects.filter(cluster=cluster)
        .order_by()
        .values_list("inputs_digest", "checked_at", "computed_at")
        .first()
    )
    if stored is not None:
        checked = stored[1] or stored[2]
        if now - checked < timedelta(seconds=settings.NODE_POOLS_INTERVAL_S):
            return 0
    at_s = now.timestamp()
    if inventory is None:
        inventory = node_inventory(
            adapter=adapter, source=source, snapshot=snapshot, at_s=at_s
        )
    if inventory is None:
        return 0
    after = recommended_requests(pod_owner)
    placements = daemon_placements(snapshot)
    prices = _pool_prices(inventory, source=source, at_s=at_s)
    digest = inputs_digest(inventory, after, placements, prices)
    if stored is not None and stored[0] == digest:
        NodePool.objects.filter(cluster=cluster).update(checked_at=now)
        return 0
    plans = plan_pools(inventory, after, placements)
    rows = [
        NodePool(
            cluster=cluster,
            name=plan.name,
            nodes=plan.nodes,
            cordoned=plan.cordoned,
            node_cpu_millicores=plan.node.cpu_millicores,
            node_memory_bytes=plan.node.memory_bytes,
            node_pods=plan.node.pods,
            node_allocatables=[list(a) for a in plan.allocatables],
            pods=plan.pods,
            nodes_needed_now=plan.nodes_needed_now,
            nodes_needed_after=plan.nodes_needed_after,
            unplaceable_now=plan.unplaceable_now,
            unplaceable_after=plan.unplaceable_after,
            held_after=plan.held_after,
            cannot_model=plan.cannot_model,
            node_source=inventory.source,
            node_source_note=inventory.note,
            node_monthly_cost=prices[plan.name][0],
            price_source=prices[plan.name][1],
            computed_at=now,
            checked_at=now,
            inputs_digest=digest,
        )
        for plan in plans
    ]
    with transaction.atomic():
        NodePool.objects.filter(cluster=cluster).delete()
        NodePool.objects.bulk_create(rows)
    return len(rows)
