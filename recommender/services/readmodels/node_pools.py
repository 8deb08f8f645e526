"""The node pools the refresh stored (``services/refresh/node_pools.py`` computes them):
nodes needed now and at the recommendations, what the difference costs, and their
total, the one figure every surface shows for the pools."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from recommender.engine.binpack import largest
from recommender.models import NodePool


@dataclass(frozen=True)
class PoolTotals:
    """The pools summed: nodes, nodes freed and their monthly cost over the pools
    that can be modelled; the others are counted apart (they give no number)."""

    pools: int
    nodes: int
    nodes_freed: int
    monthly_cost_freed: float
    unmodelled: int


def node_pools(*, cluster: str = "") -> Sequence[NodePool]:
    """The stored pools of the enabled clusters (of ``cluster`` when given)."""
    pools = NodePool.objects.filter(cluster__is_enabled=True).select_related("cluster")
    if cluster:
        pools = pools.filter(cluster__name=cluster)
    return list(pools)


def pool_totals(pools: Sequence[NodePool]) -> PoolTotals:
    """The total of ``pools`` (``node_pools``' answer)."""
    modelled = [p for p in pools if p.is_modelled]
    return PoolTotals(
        pools=len(pools),
        nodes=sum(p.nodes for p in pools),
        nodes_freed=sum(p.nodes_freed or 0 for p in modelled),
        monthly_cost_freed=sum(p.monthly_cost_freed or 0.0 for p in modelled),
        unmodelled=len(pools) - len(modelled),
    )


def node_allocatables(*, cluster_id: int) -> tuple[tuple[int, int], ...] | None:
    """The (cpu millicores, memory bytes) allocatable of the cluster's largest
    schedulable nodes, as the last node-pools step read them: a pod that fits none
    of them fits no node. None when no node is known (no pools stored)."""
    rows = list(
        NodePool.objects.filter(cluster_id=cluster_id).values_list(
            "node_allocatables", flat=True
        )
    )
    if not rows:
        return None
    return largest(
        (int(cpu), int(memory)) for shapes in rows for cpu, memory in shapes or ()
    )
