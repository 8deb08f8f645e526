"""Nodes each node pool could free: its pods packed by their requests now and at
the recommendations (``engine.binpack``), priced at the pool's node prices.

The nodes and the pods on them come from kube-state-metrics in Prometheus
(``cluster.nodes``), or the simulated cluster's layout; another usage source has
no nodes and stores no pools. A pool's nodes are taken as alike, each with the
smallest allocatable of the pool's nodes; each DaemonSet on a pool's nodes costs
every node its largest pod's requests and one pod slot; a pod's request is the sum
of its containers' (init containers left out). Definitions: docs/dashboard.md,
"Nodes you can free".
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.conf import settings
from django.db import transaction

from recommender.cluster.base import ClusterSnapshot
from recommender.cluster.nodes import (
    FALLBACK_POOL_LABELS,
    KSM_METRICS,
    NodeInventory,
    NodeRecord,
    PodRequests,
    inventory_from_ksm,
)
from recommender.cluster.simulated import SimulatedCluster
from recommender.cluster.simulated_nodes import simulated_inventory
from recommender.engine.binpack import NodeShape, pack
from recommender.models import Cluster, Container, NodePool
from recommender.models.provisioning import HOURS_PER_MONTH
from recommender.services.refresh.node_prices import (
    NodeFacts,
    labelled,
    load_price_table,
    node_price,
    opencost_nodes,
)
from recommender.sources.base import UsageSource

GIB = 2**30
# (namespace, pod) -> container -> targets (cpu millicores, memory bytes); None: none
Targets = Mapping[str, tuple[int | None, int | None]]
Requests = Mapping[tuple[str, str], Targets]


@dataclass(frozen=True)
class PoolPlan:
    name: str
    nodes: int
    node: NodeShape
    pods: int
    nodes_needed_now: int
    nodes_needed_after: int
    unplaceable_now: int
    unplaceable_after: int


def pool_labels() -> tuple[str, ...]:
    """The node labels that name a node's pool, first found wins."""
    return (settings.NODE_POOL_LABEL, *FALLBACK_POOL_LABELS)


def node_inventory(
    *, adapter: object, source: UsageSource, snapshot: ClusterSnapshot, at_s: float
) -> NodeInventory | None:
    """The cluster's nodes and pods: KSM's series, the simulation's layout, or
    None (no source of nodes)."""
    if source.reads_cluster_series:
        samples = source.instant_samples(KSM_METRICS, at_s=at_s)
        return inventory_from_ksm(samples, pool_labels=pool_labels())
    if isinstance(adapter, SimulatedCluster):
        return simulated_inventory(adapter.fleet, snapshot)
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


def plan_pools(inventory: NodeInventory, after: Requests) -> list[PoolPlan]:
    """Each pool's nodes needed by its pods' requests now, and with the pods of
    ``after`` at those requests instead (containers not named keep theirs)."""
    pools: dict[str, list[NodeRecord]] = defaultdict(list)
    for node in inventory.nodes.values():
        pools[node.pool].append(node)
    # Per pool: the pods' (now, after) totals, and each DaemonSet's largest pod.
    pods_of: dict[str, list[tuple[int, int, int, int]]] = defaultdict(list)
    daemons_of: dict[str, dict[tuple[str, str], list[int]]] = defaultdict(dict)
    pool_of = {name: node.pool for name, node in inventory.nodes.items()}
    for pod in inventory.pods:
        pool = pool_of[pod.node]
        current = _pod_total(pod, None)
        targets = after.get((pod.namespace, pod.name))
        recommended = _pod_total(pod, targets) if targets else current
        if not pod.is_daemon:
            pods_of[pool].append((*current, *recommended))
            continue
        largest = daemons_of[pool].setdefault(
            (pod.namespace, pod.owner_name), [0, 0, 0, 0]
        )
        for i, amount in enumerate((*current, *recommended)):
            largest[i] = max(largest[i], amount)
    plans = []
    for name, nodes in sorted(pools.items()):
        shape = NodeShape(
            cpu_millicores=min(n.cpu_millicores for n in nodes),
            memory_bytes=min(n.memory_bytes for n in nodes),
            pods=min(n.pods for n in nodes),
        )
        totals = np.array(pods_of[name], dtype=np.int64).reshape(-1, 4)
        daemons = list(daemons_of[name].values())
        now, then = (
            pack(
                totals[:, column],
                totals[:, column + 1],
                node=shape,
                overhead=NodeShape(
                    cpu_millicores=sum(d[column] for d in daemons),
                    memory_bytes=sum(d[column + 1] for d in daemons),
                    pods=len(daemons),
                ),
            )
            for column in (0, 2)
        )
        plans.append(
            PoolPlan(
                name=name,
                nodes=len(nodes),
                node=shape,
                pods=len(totals),
                nodes_needed_now=now.nodes,
                nodes_needed_after=then.nodes,
                unplaceable_now=now.unplaceable,
                unplaceable_after=then.unplaceable,
            )
        )
    return plans


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


def _pool_prices(
    inventory: NodeInventory, *, source: UsageSource, at_s: float
) -> dict[str, tuple[float, str]]:
    """Each pool's mean monthly price of a node, and the source that priced most
    of its nodes (services/refresh/node_prices.py)."""
    facts = labelled(
        opencost_nodes(source, at_s=at_s),
        {node.name: node.labels for node in inventory.nodes.values()},
    )
    path = settings.PRICE_TABLE
    table = load_price_table(path) if path else []
    costs: dict[str, list[float]] = defaultdict(list)
    sources: dict[str, Counter[str]] = defaultdict(Counter)
    for node in inventory.nodes.values():
        price = node_price(node.name, facts.get(node.name, NodeFacts()), table)
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
    adapter: object,
    source: UsageSource,
    snapshot: ClusterSnapshot,
    pod_owner: Mapping[tuple[str, str], int],
    now: datetime,
) -> int:
    """Plan and store the cluster's node pools (replacing the stored ones);
    returns the pools stored. Without a source of nodes nothing changes."""
    at_s = now.timestamp()
    inventory = node_inventory(
        adapter=adapter, source=source, snapshot=snapshot, at_s=at_s
    )
    if inventory is None:
        return 0
    after = recommended_requests(pod_owner)
    plans = plan_pools(inventory, after)
    prices = _pool_prices(inventory, source=source, at_s=at_s)
    rows = [
        NodePool(
            cluster=cluster,
            name=plan.name,
            nodes=plan.nodes,
            node_cpu_millicores=plan.node.cpu_millicores,
            node_memory_bytes=plan.node.memory_bytes,
            node_pods=plan.node.pods,
            pods=plan.pods,
            nodes_needed_now=plan.nodes_needed_now,
            nodes_needed_after=plan.nodes_needed_after,
            unplaceable_now=plan.unplaceable_now,
            unplaceable_after=plan.unplaceable_after,
            node_monthly_cost=prices[plan.name][0],
            price_source=prices[plan.name][1],
            computed_at=now,
        )
        for plan in plans
    ]
    with transaction.atomic():
        NodePool.objects.filter(cluster=cluster).delete()
        NodePool.objects.bulk_create(rows)
    return len(rows)
