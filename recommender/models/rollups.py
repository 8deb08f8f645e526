"""Each workload's stored rollup amounts (services/readmodels/label_rollups.py)."""

from __future__ import annotations

from django.db import models

from recommender.models.fleet import Workload


class WorkloadAmounts(models.Model):
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
    containers = models.IntegerField(default=0)
    covered = models.IntegerField(default=0)
    requested_cpu_millicores = models.BigIntegerField(default=0)
    requested_memory_bytes = models.BigIntegerField(default=0)
    covered_requested_cpu_millicores = models.BigIntegerField(default=0)
    covered_requested_memory_bytes = models.BigIntegerField(default=0)
    recommended_cpu_millicores = models.BigIntegerField(default=0)
    recommended_memory_bytes = models.BigIntegerField(default=0)

    class Meta:
        verbose_name_plural = "workload amounts"

    def __str__(self) -> str:
        return str(self.workload_id)
