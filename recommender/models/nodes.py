"""Each node pool's packing, stored by a whole-cluster refresh: the nodes it has,
the nodes its pods' requests need now and at the recommendations, and what one
node costs a month (services/refresh/node_pools.py)."""

from __future__ import annotations

from django.db import models

from recommender.models.fleet import Cluster


class NodePool(models.Model):
    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="node_pools"
    )
    # The pool label's value ("" for nodes without a pool label).
    name = models.CharField(max_length=253, blank=True)
    nodes = models.IntegerField()
    node_cpu_millicores = models.BigIntegerField()
    node_memory_bytes = models.BigIntegerField()
    node_pods = models.IntegerField()
    pods = models.IntegerField()
    nodes_needed_now = models.IntegerField()
    nodes_needed_after = models.IntegerField()
    # Pods no node of the pool can hold (requests larger than a node).
    unplaceable_now = models.IntegerField(default=0)
    unplaceable_after = models.IntegerField(default=0)
    node_monthly_cost = models.FloatField()
    price_source = models.CharField(max_length=16)
    computed_at = models.DateTimeField()

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "name"], name="node_pool_unique_per_cluster"
            )
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.name or '(no pool label)'}"

    @property
    def nodes_freed(self) -> int:
        return self.nodes_needed_now - self.nodes_needed_after

    @property
    def monthly_cost_freed(self) -> float:
        return self.nodes_freed * self.node_monthly_cost
