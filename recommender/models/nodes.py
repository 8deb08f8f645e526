"""Each node pool's packing, stored by a whole-cluster refresh: the nodes it has,
the nodes its pods' requests need now and at the recommendations (or why that
cannot be modelled), where the nodes were read, and what one node costs a month
(services/refresh/node_pools.py). A cluster's rows are one plan: they share
``computed_at``, ``checked_at`` and ``inputs_digest``."""

from __future__ import annotations

from django.db import models

from recommender.models.fleet import Cluster


class NodePool(models.Model):
    """One node pool of a cluster as the last node-pools step packed it."""

    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="node_pools"
    )
    # The pool label's value ("" for nodes without a pool label).
    name = models.CharField(max_length=253, blank=True)
    nodes = models.IntegerField()
    # Of ``nodes``, those cordoned (spec.unschedulable): no pod is packed onto them.
    cordoned = models.IntegerField(default=0)
    # The allocatable of the pool's most common node.
    node_cpu_millicores = models.BigIntegerField()
    node_memory_bytes = models.BigIntegerField()
    node_pods = models.IntegerField()
    # [cpu millicores, memory bytes] of the schedulable nodes no other node of the
    # pool beats in both: a pod whose requests fit none of them fits no node.
    node_allocatables = models.JSONField(default=list)
    pods = models.IntegerField()
    nodes_needed_now = models.IntegerField()
    nodes_needed_after = models.IntegerField()
    # Pods not placed: requests larger than every node of the pool (less its
    # DaemonSets), or no node left for them.
    unplaceable_now = models.IntegerField(default=0)
    unplaceable_after = models.IntegerField(default=0)
    # Pods kept at their requests in "after": their recommendation fits no node of
    # the cluster, and vpaweb writes no such request (services/advice/advise.py).
    held_after = models.IntegerField(default=0)
    # Why the pool's nodes cannot be modelled ("" when they can): then no count of
    # nodes freed is given.
    cannot_model = models.TextField(blank=True, default="")
    # Where the nodes were read (cluster.nodes FROM_*), and why not from the API
    # server when it was not.
    node_source = models.CharField(max_length=32, blank=True, default="")
    node_source_note = models.TextField(blank=True, default="")
    node_monthly_cost = models.FloatField()
    price_source = models.CharField(max_length=16)
    # When this plan was packed, and when its inputs were last read and compared
    # (equal inputs leave the plan as it is).
    computed_at = models.DateTimeField()
    checked_at = models.DateTimeField(null=True, blank=True)
    inputs_digest = models.CharField(max_length=64, blank=True, default="")

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
    def is_modelled(self) -> bool:
        return not self.cannot_model

    @property
    def nodes_freed(self) -> int | None:
        """Nodes the recommendations free: needed now less needed after, never
        below 0 (None when the pool cannot be modelled)."""
        if self.cannot_model:
            return None
        return max(0, self.nodes_needed_now - self.nodes_needed_after)

    @property
    def nodes_added(self) -> int | None:
        """Nodes the recommendations would need beyond those needed now."""
        if self.cannot_model:
            return None
        return max(0, self.nodes_needed_after - self.nodes_needed_now)

    @property
    def monthly_cost_freed(self) -> float | None:
        freed = self.nodes_freed
        return None if freed is None else freed * self.node_monthly_cost
