"""Which clusters are failing to refresh, since when and why: the overview, the
clusters table and the API's clusters show it until a refresh succeeds.

A cluster is failing while its latest finished refresh run (of the whole cluster or
of one namespace shard) failed. It has been failing since the first failed refresh
after its last successful one (or its first refresh, when none ever succeeded).
One query finds the failing clusters (the latest finished refresh of each, through
the ``run_cluster_started`` index), however many clusters and runs are stored; a few
more per failing cluster say since when.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import OuterRef, QuerySet, Subquery

from recommender.models import Cluster, RefreshRun


@dataclass(frozen=True)
class ClusterFailure:
    """A cluster whose refreshes fail."""

    cluster_id: int
    cluster: str
    # The latest failed run's error, and the namespace it covered ("" whole cluster).
    error: str
    shard: str
    last_failed_at: datetime
    # When the failing began: the first failed refresh after the last good one.
    since: datetime
    # Refreshes failed since then; None when it never succeeded and many failed.
    failed_runs: int
    last_succeeded_at: datetime | None

    def as_dict(self) -> dict[str, object]:
        """The API's shape (``ClusterFailureSerializer``)."""
        return {
            "error": self.error,
            "shard": self.shard,
            "since": self.since,
            "last_failed_at": self.last_failed_at,
            "last_succeeded_at": self.last_succeeded_at,
            "failed_runs": self.failed_runs,
        }


def cluster_failure(cluster: Cluster) -> ClusterFailure | None:
    """The cluster's refresh failure, or None while its latest refresh succeeded."""
    runs = RefreshRun.objects.filter(
        cluster=cluster, kind=RefreshRun.Kind.REFRESH
    ).order_by("-started_at", "-pk")
    latest = (
        _finished_refreshes()
        .filter(cluster=cluster)
        .order_by("-started_at", "-pk")
        .first()
    )
    if latest is None or latest.status != RefreshRun.Status.FAILED:
        return None
    last_good = runs.filter(status=RefreshRun.Status.SUCCEEDED).first()
    failed = runs.filter(status=RefreshRun.Status.FAILED)
    if last_good is not None:
        failed = failed.filter(started_at__gt=last_good.started_at)
    first = failed.order_by("started_at", "pk").first() or latest
    return ClusterFailure(
        cluster_id=cluster.pk,
        cluster=cluster.name,
        error=latest.error or f"the refresh failed ({latest.status})",
        shard=latest.shard,
        last_failed_at=latest.started_at,
        since=first.started_at,
        failed_runs=failed.count(),
        last_succeeded_at=last_good.started_at if last_good is not None else None,
    )


def _finished_refreshes() -> QuerySet[RefreshRun]:
    return RefreshRun.objects.filter(kind=RefreshRun.Kind.REFRESH).exclude(
        status=RefreshRun.Status.RUNNING
    )


def failing_clusters(clusters: QuerySet[Cluster] | None = None) -> list[ClusterFailure]:
    """Every failing cluster among ``clusters`` (default: the enabled ones), by name."""
    if clusters is None:
        clusters = Cluster.objects.filter(is_enabled=True)
    latest_status = Subquery(
        _finished_refreshes()
        .filter(cluster=OuterRef("pk"))
        .order_by("-started_at", "-pk")
        .values("status")[:1]
    )
    failing = (
        clusters.annotate(latest_status=latest_status)
        .filter(latest_status=RefreshRun.Status.FAILED)
        .order_by("name")
    )
    return [
        failure
        for failure in (cluster_failure(cluster) for cluster in failing)
        if failure is not None
    ]
