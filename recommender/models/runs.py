"""Background runs (refresh, back-fill, expiry, updater) and what they recorded.

Resource amounts are stored as upstream VPA keeps them: CPU in integer millicores,
memory in integer bytes; ``None`` means "not set".
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from recommender.models.fleet import Cluster


class RefreshRun(models.Model):
    """One background run (discovery, ingestion, back-fill, recommendation) as a row."""

    class Kind(models.TextChoices):
        REFRESH = "refresh"
        BACKFILL = "backfill"
        EXPIRE = "expire"
        PRUNE = "prune"

    class Status(models.TextChoices):
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    cluster = models.ForeignKey(
        Cluster, null=True, blank=True, on_delete=models.CASCADE, related_name="runs"
    )
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.REFRESH)
    # A shard (namespace) when the run covers only part of a cluster.
    shard = models.CharField(max_length=253, blank=True)
    status = models.CharField(
        max_length=20, choices=Status.choices, default=Status.RUNNING
    )
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Renewed by the running process (services/operations/runs.py): a RUNNING row
    # whose beat is older than a refresh interval lost its worker and is reaped.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    progress = models.FloatField(default=0.0)
    counts = models.JSONField(default=dict, blank=True)
    timings = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            # The overview's "last runs" panel.
            models.Index(fields=["-started_at"], name="run_started"),
            # A cluster's latest refresh runs (services/operations/cluster_health.py).
            models.Index(
                fields=["cluster", "kind", "-started_at"], name="run_cluster_started"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.status} @ {self.started_at:%Y-%m-%d %H:%M:%S}"

    @property
    def duration_s(self) -> float | None:
        """Seconds from start to finish, or None while running."""
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()
