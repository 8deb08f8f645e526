"""Each workload's stored rollup amounts (services/readmodels/label_rollups.py) and
their sums per group (services/readmodels/group_totals.py)."""

from __future__ import annotations

from django.db import models

from recommender.models.fleet import Cluster, ContainerAmounts, Workload


class WorkloadAmounts(ContainerAmounts):
    """What the rollups sum of one workload that depends on neither the prices nor
    the time: its (non-init) containers, the covered ones, and its requested and
    recommended amounts, all replicas, rounded to whole millicores and bytes.

    Written by the refresh with the workload's ``WorkloadTotals``, in the same
    transaction and scope; complete for a cluster once ``Cluster.totals_at`` is set.
    A workload without a row (added since by hand) reads as one without containers
    until the next refresh.
    """

    workload = models.OneToOneField(
        Workload, on_delete=models.CASCADE, primary_key=True, related_name="amounts"
    )

    class Meta:
        verbose_name_plural = "workload amounts"

    def __str__(self) -> str:
        return str(self.workload_id)


class GroupTotals(ContainerAmounts):
    """What the rollups sum of a cluster's active workloads without a stored OOM
    kill (``WorkloadTotals.latest_oom_at`` None), per namespace, kind and value of
    the rollup label (``label_key``, VPAWEB_ROLLUP_LABEL_KEY): their
    ``WorkloadAmounts``, and their facts and savings at the list prices the refresh
    stored them at (``price_per_core_hour``, ``price_per_gib_hour``).

    Written by the refresh after the workloads' rows, in the same transaction and
    scope (services/readmodels/group_totals.py); read while every enabled cluster's
    rows are complete (``Cluster.totals_at``), for that label key and those prices.
    """

    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="group_totals"
    )
    namespace = models.CharField(max_length=63)
    kind = models.CharField(max_length=32)
    # The value of the label ``label_key``; "": workloads without it (the rollups'
    # group "" either way).
    label = models.TextField(blank=True, default="")
    label_key = models.CharField(max_length=317)
    price_per_core_hour = models.FloatField()
    price_per_gib_hour = models.FloatField()
    workloads = models.IntegerField(default=0)
    savings = models.FloatField(default=0.0)
    # Workloads with each fact (one may have several), and per headline status.
    at_risk = models.IntegerField(default=0)
    wasteful = models.IntegerField(default=0)
    missing_requests = models.IntegerField(default=0)
    statuses = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name_plural = "group totals"

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.namespace}/{self.kind}/{self.label}"
