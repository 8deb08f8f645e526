"""Recommendations and the engine state behind them: checkpoints, OOM kills and the
hourly usage the workload page charts.

Resource amounts are stored as upstream VPA keeps them: CPU in integer millicores,
memory in integer bytes; ``None`` means "not set".
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils import timezone

from recommender.engine.resources import Resources
from recommender.models.fleet import Container
from recommender.models.provisioning import usage_floor


def confidence_of(explanation: dict[str, Any] | None) -> float | None:
    """The CPU confidence of an engine explanation (upstream uses it for both);
    None when it is missing or not a number."""
    resources = explanation.get("resources") if isinstance(explanation, dict) else None
    cpu = resources.get("cpu") if isinstance(resources, dict) else None
    value = cpu.get("confidence") if isinstance(cpu, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class RecommendationQuerySet(models.QuerySet["Recommendation"]):
    """Reads over recommendation history."""

    def latest_per_container(self) -> RecommendationQuerySet:
        """Each container's newest recommendation (via the denormalised pointer)."""
        return self.filter(pk__in=Container.objects.values("latest_recommendation_id"))


class Recommendation(models.Model):
    """One recommendation of one container; a new row only when a value changed."""

    # No index of its own: rec_container_time's leads with it (a refresh that moved
    # 13,854 recommendations at 100,000 containers updated both for every row).
    container = models.ForeignKey(
        Container,
        on_delete=models.CASCADE,
        related_name="recommendations",
        db_index=False,
    )
    created_at = models.DateTimeField(default=timezone.now)
    profile = models.CharField(max_length=64, default="vpa")
    target_cpu_millicores = models.BigIntegerField(null=True, blank=True)
    target_memory_bytes = models.BigIntegerField(null=True, blank=True)
    lower_cpu_millicores = models.BigIntegerField(null=True, blank=True)
    lower_memory_bytes = models.BigIntegerField(null=True, blank=True)
    upper_cpu_millicores = models.BigIntegerField(null=True, blank=True)
    upper_memory_bytes = models.BigIntegerField(null=True, blank=True)
    uncapped_cpu_millicores = models.BigIntegerField(null=True, blank=True)
    uncapped_memory_bytes = models.BigIntegerField(null=True, blank=True)
    # The engine's explanation (Explanation.to_dict()) plus the caps applied.
    explanation = models.JSONField(default=dict, blank=True)
    # The lower bounds without the pod minimum's per-container share (the "usage
    # floor" risk is judged by, models/provisioning.py), kept from the explanation
    # when the row is written so lists need not read the JSON; None: no lower bound.
    floor_cpu_millicores = models.BigIntegerField(null=True, blank=True)
    floor_memory_bytes = models.BigIntegerField(null=True, blank=True)
    # The explanation's CPU confidence (days of history, upstream's unit;
    # ``confidence_of``), kept when the row is written so the overview's confidence
    # bands need not read the JSON of every row; None: not stated or malformed.
    confidence = models.FloatField(null=True, blank=True)

    objects = RecommendationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # The workload page's history chart: one container's rows by time.
            models.Index(fields=["container", "created_at"], name="rec_container_time"),
            # Retention (services/operations/retention.py): the rows past a cutoff,
            # oldest first, and the runs page's oldest row, without a scan of the whole
            # history.
            models.Index(fields=["created_at"], name="rec_created"),
        ]

    def __str__(self) -> str:
        return f"{self.container} @ {self.created_at:%Y-%m-%d %H:%M}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.fill_explanation_columns()
        super().save(*args, **kwargs)

    def fill_explanation_columns(self) -> None:
        """Set the columns kept from the explanation: the usage floors (from the lower
        bounds too) and the confidence (called by ``save`` and by writers that insert
        in bulk, which skips it)."""
        self.floor_cpu_millicores = usage_floor(
            self.lower_cpu_millicores, self.explanation, "cpu"
        )
        self.floor_memory_bytes = usage_floor(
            self.lower_memory_bytes, self.explanation, "memory"
        )
        self.confidence = confidence_of(self.explanation)

    @property
    def target(self) -> Resources:
        """The capped target."""
        return Resources(self.target_cpu_millicores, self.target_memory_bytes)

    @property
    def lower_bound(self) -> Resources:
        """The capped lower bound."""
        return Resources(self.lower_cpu_millicores, self.lower_memory_bytes)

    @property
    def upper_bound(self) -> Resources:
        """The capped upper bound."""
        return Resources(self.upper_cpu_millicores, self.upper_memory_bytes)

    @property
    def uncapped_target(self) -> Resources:
        """The target before policy capping."""
        return Resources(self.uncapped_cpu_millicores, self.uncapped_memory_bytes)

    def values_tuple(self) -> tuple[int | None, ...]:
        """All eight amounts: two rows with equal tuples are the same recommendation."""
        return (
            self.target_cpu_millicores,
            self.target_memory_bytes,
            self.lower_cpu_millicores,
            self.lower_memory_bytes,
            self.upper_cpu_millicores,
            self.upper_memory_bytes,
            self.uncapped_cpu_millicores,
            self.uncapped_memory_bytes,
        )


class Checkpoint(models.Model):
    """Engine state of a container's aggregate: a restart loses and re-reads nothing.

    ``version`` increases on every write; writers update with ``version=old`` in the
    filter (compare-and-swap), so two workers can never both apply the same samples.
    """

    container = models.OneToOneField(
        Container, on_delete=models.CASCADE, related_name="checkpoint"
    )
    # Profile.histogram_key of the state, as text; a different key means rebuild.
    histogram_key = models.CharField(max_length=200)
    state = models.BinaryField()
    # The newest sample time ingested (the watermark); None before any sample.
    last_sample_at = models.DateTimeField(null=True, blank=True)
    sample_count = models.BigIntegerField(default=0)
    version = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)
    # What its writer read after the watermark and did not store (late samples may
    # still arrive there: docs/refresh.md, "Late samples"): up to when, and how many
    # samples it found (CPU and memory each count); the next reader counts what
    # arrived since.
    read_through_at = models.DateTimeField(null=True, blank=True)
    unsettled_samples = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"checkpoint of {self.container} v{self.version}"


class OomKill(models.Model):
    """An OOM kill (or memory eviction) seen for a container of a pod."""

    container = models.ForeignKey(
        Container, on_delete=models.CASCADE, related_name="oom_kills"
    )
    pod = models.CharField(max_length=253)
    occurred_at = models.DateTimeField()
    memory_request_bytes = models.BigIntegerField(default=0)
    is_eviction = models.BooleanField(default=False)

    class Meta:
        ordering = ["-occurred_at"]
        constraints = [
            # The same kill read twice (two workers, a retry) is stored once.
            models.UniqueConstraint(
                fields=["container", "pod", "occurred_at"], name="oom_kill_once"
            )
        ]
        indexes = [
            # The overview's newest OOM kills (and the last week's, counted): read
            # from the newest instead of scanning every kill (25 ms -> 0.1 ms at
            # 120,000 kills).
            models.Index(fields=["occurred_at"], name="oom_kill_time"),
        ]

    def __str__(self) -> str:
        return f"OOM {self.container} {self.pod} @ {self.occurred_at}"


class UsageHour(models.Model):
    """One hour of a container's usage, for the workload page's chart: the peak, sum
    and count of the one-minute samples of all its pods in (``ends_at`` - 1 h,
    ``ends_at``]. The refresh adds to it with the checkpoint that holds the same
    samples (docs/refresh.md, "Usage hours"); retention prunes it."""

    container = models.ForeignKey(
        Container, on_delete=models.CASCADE, related_name="usage_hours"
    )
    ends_at = models.DateTimeField()
    # CPU in cores, memory in working-set bytes; a peak is None without a sample.
    cpu_max_cores = models.FloatField(null=True)
    cpu_sum_cores = models.FloatField(default=0.0)
    cpu_samples = models.IntegerField(default=0)
    memory_max_bytes = models.FloatField(null=True)
    memory_sum_bytes = models.FloatField(default=0.0)
    memory_samples = models.IntegerField(default=0)

    class Meta:
        constraints = [
            # One row per container and hour: the refresh's upsert merges into it,
            # and the chart reads a container's hours by it.
            models.UniqueConstraint(
                fields=["container", "ends_at"], name="usage_hour_once"
            )
        ]
        indexes = [
            # Retention's prune: the hours past VPAWEB_RETENTION_USAGE_DAYS.
            models.Index(fields=["ends_at"], name="usage_hour_time"),
        ]

    def __str__(self) -> str:
        return f"usage of {self.container_id} to {self.ends_at}"
