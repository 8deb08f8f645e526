"""The node pools the refresh stored (``services/refresh/node_pools.py`` computes them):
nodes needed now and at the recommendations, and what the difference costs."""

from __future__ import annotations

from collections.abc import Sequence

from recommender.models import NodePool


def node_pools(*, cluster: str = "") -> Sequence[NodePool]:
    """The stored pools of the enabled clusters (of ``cluster`` when given)."""
    pools = NodePool.objects.filter(cluster__is_enabled=True).select_related("cluster")
    if cluster:
        pools = pools.filter(cluster__name=cluster)
    return list(pools)
