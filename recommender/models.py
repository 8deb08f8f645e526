"""vpaweb's data: clusters, their workloads and containers, policies, recommendations
and the engine state behind them, background runs, resize changes and the audit trail.

Resource amounts are stored as upstream VPA keeps them: CPU in integer millicores,
memory in integer bytes; ``None`` means "not set".
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from recommender.engine.resources import Resources


class Cluster(models.Model):
    """A Kubernetes cluster vpaweb reads from (or the built-in simulated one)."""

    class Kind(models.TextChoices):
        SIMULATED = "simulated", "Simulated"
        KUBERNETES = "kubernetes", "Kubernetes"

    name = models.SlugField(max_length=63, unique=True)
    kind = models.CharField(
        max_length=20, choices=Kind.choices, default=Kind.KUBERNETES
    )
    # For Kubernetes: the kubeconfig context, or "" for in-cluster / current context.
    context = models.CharField(max_length=253, blank=True)
    is_enabled = models.BooleanField(default=True)
    # Per-cluster pause of every write the updater would make (proposals continue).
    updates_paused = models.BooleanField(default=False)
    last_discovered_at = models.DateTimeField(null=True, blank=True)
    # VerticalPodAutoscalers whose target discovery did not find, as of the last pass
    # over their namespace: [{"namespace", "name", "target_kind", "target_name",
    # "message"}] (services/refresh/cluster_objects.py).
    vpa_objects_without_target = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Workload(models.Model):
    """A top-level controller (Deployment, StatefulSet, …): one upstream VPA target."""

    class Kind(models.TextChoices):
        DEPLOYMENT = "Deployment"
        STATEFUL_SET = "StatefulSet"
        DAEMON_SET = "DaemonSet"
        REPLICA_SET = "ReplicaSet"
        JOB = "Job"
        CRON_JOB = "CronJob"
        REPLICATION_CONTROLLER = "ReplicationController"

    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="workloads"
    )
    kind = models.CharField(max_length=32, choices=Kind.choices)
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    selector = models.JSONField(default=dict, blank=True)
    replicas = models.IntegerField(null=True, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    # False once discovery no longer finds it; kept for its history.
    is_active = models.BooleanField(default=True)
    first_seen_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)
    # HPAs that scale this workload on a resource its policy controls (they would fight
    # vpaweb): [{"name": "<hpa>", "resources": ["cpu", ...]}], set by discovery.
    hpa_conflicts = models.JSONField(default=list, blank=True)
    # PodDisruptionBudgets selecting its pods (kube_objects.pdb_of shape), for the
    # updater: [{"name", "min_available", "max_unavailable", ...}], set by discovery.
    pod_disruption_budgets = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["cluster__name", "namespace", "kind", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "kind", "name"],
                name="workload_natural_key",
            )
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"


class NamespaceLimitRange(models.Model):
    """A namespace's LimitRanges combined as upstream combines them (lowest Max, highest
    Min, last Default), for capping; set by discovery, gone when the namespace has none.

    Items are ``engine.capping.LimitRangeItem`` fields as JSON
    (``services.limits.limit_ranges_for`` turns them back).
    """

    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="limit_ranges"
    )
    namespace = models.CharField(max_length=63)
    # {"type": "Container", "max": {"cpu_millicores": int|None, "memory_bytes": ...},
    #  "min": {...}, "default": {...}, "default_request": {...}}; None: no such item.
    container_item = models.JSONField(null=True, blank=True)
    pod_item = models.JSONField(null=True, blank=True)
    # The LimitRange objects combined, by name (to say where a cap comes from).
    sources = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["cluster_id", "namespace"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace"], name="limit_range_per_namespace"
            )
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.namespace} limit ranges"


class Container(models.Model):
    """A container of a workload's pod template; replicas share one engine aggregate."""

    class Kind(models.TextChoices):
        REGULAR = "regular"
        INIT = "init"
        SIDECAR = (
            "sidecar"  # native sidecar: an init container with restartPolicy Always
        )

    workload = models.ForeignKey(
        Workload, on_delete=models.CASCADE, related_name="containers"
    )
    name = models.CharField(max_length=253)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.REGULAR)
    position = models.PositiveIntegerField(default=0)
    request_cpu_millicores = models.BigIntegerField(null=True, blank=True)
    request_memory_bytes = models.BigIntegerField(null=True, blank=True)
    limit_cpu_millicores = models.BigIntegerField(null=True, blank=True)
    limit_memory_bytes = models.BigIntegerField(null=True, blank=True)
    # The requests and limits above are what the live pods carry (the API server's
    # LimitRanger fills what the template leaves out); the template's own values and
    # where each current value came from (Source) are kept beside them.
    template_resources = models.JSONField(default=dict, blank=True)
    resource_sources = models.JSONField(default=dict, blank=True)
    # Denormalised pointer to the newest Recommendation: lists need no per-row subquery.
    latest_recommendation = models.ForeignKey(
        "Recommendation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["workload_id", "position", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["workload", "name"], name="container_per_workload"
            )
        ]

    class Source(models.TextChoices):
        """Where a container's current request or limit came from."""

        TEMPLATE = "template", "pod template"
        LIMIT_RANGE = "limitrange", "LimitRange default"
        POD = "pod", "the live pod"

    def __str__(self) -> str:
        return f"{self.workload}/{self.name}"

    @property
    def requests(self) -> Resources:
        """Current requests as engine Resources."""
        return Resources(self.request_cpu_millicores, self.request_memory_bytes)

    @property
    def limits(self) -> Resources:
        """Current limits as engine Resources."""
        return Resources(self.limit_cpu_millicores, self.limit_memory_bytes)


class WorkloadPod(models.Model):
    """A pod discovery saw, and the workload its owner references lead to (Pod ->
    ReplicaSet -> Deployment, Pod -> Job -> CronJob): the one record of which pods
    belong to which workload, kept after the pod is gone for the usage history."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    workload = models.ForeignKey(
        Workload, on_delete=models.CASCADE, related_name="pods"
    )
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    # The pod's direct controller (a ReplicaSet, a Job, ...).
    owner_kind = models.CharField(max_length=64, blank=True)
    owner_name = models.CharField(max_length=253, blank=True)
    # Per container: {"requests": {"cpu": m, "memory": b}, "limits": {...}} as the
    # pod carries them, and the kubernetes.io/limit-ranger annotation's text.
    containers = models.JSONField(default=dict, blank=True)
    limit_ranger = models.TextField(blank=True)
    first_seen_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="pod_per_namespace"
            )
        ]
        indexes = [models.Index(fields=["workload", "last_seen_at"])]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class PolicyQuerySet(models.QuerySet["Policy"]):
    """Reads over policies."""

    def actionable(self) -> PolicyQuerySet:
        """The policies vpaweb may act on (webhook, updater):
        :attr:`Policy.is_actionable` as a filter, so a candidate list and a single
        check agree."""
        return self.filter(source=Policy.Source.VPAWEB).exclude(mode=Policy.Mode.OFF)


class Policy(models.Model):
    """How vpaweb treats one workload: mode, profile and per-container policies.

    Every policy has one owner (``source``):

    - ``vpaweb``: an operator chose it in vpaweb (or nobody has: the default, mode Off).
      vpaweb may act on it: :attr:`is_actionable` is true when its mode is not Off.
    - ``vpa-object``: it mirrors the upstream VerticalPodAutoscaler ``vpa_object``
      (mode, container policies, min replicas, kept in step by discovery). It is shown
      with the object's mode, and vpaweb never acts on it, whatever the mode: the
      upstream VPA does. An operator can adopt it (``services.policies.adopt_policy``):
      it becomes vpaweb's, starting in Off.

    The webhook and the updater ask ONE question before they touch a pod:
    ``policy.is_actionable`` (or ``Policy.objects.actionable()``); never ``mode``
    alone, since a mirrored policy carries a non-Off mode vpaweb must not act on.
    """

    class Mode(models.TextChoices):
        # Labels spelt as upstream's updateMode values, everywhere they are shown.
        OFF = "Off", "Off"
        INITIAL = "Initial", "Initial"
        RECREATE = "Recreate", "Recreate"
        IN_PLACE_OR_RECREATE = "InPlaceOrRecreate", "InPlaceOrRecreate"

    class Source(models.TextChoices):
        VPAWEB = "vpaweb", "vpaweb"
        VPA_OBJECT = "vpa-object", "Imported VPA object"

    workload = models.OneToOneField(
        Workload, on_delete=models.CASCADE, related_name="policy"
    )
    mode = models.CharField(max_length=20, choices=Mode.choices, default=Mode.OFF)
    profile = models.CharField(max_length=64, default="vpa")
    # Field overrides of the profile (engine Profile.with_overrides), e.g. percentiles.
    profile_overrides = models.JSONField(default=dict, blank=True)
    # Upstream containerPolicies: [{"containerName": "*", "minAllowed": {...}, ...}].
    container_policies = models.JSONField(default=list, blank=True)
    min_replicas = models.PositiveIntegerField(null=True, blank=True)

    class Approval(models.TextChoices):
        MANUAL = "manual", "Manual (an operator approves each change)"
        AUTOMATIC = "automatic", "Automatic (changes are approved as proposed)"

    # Whether the updater's resize changes wait for an operator (docs/updater.md).
    approval = models.CharField(
        max_length=10, choices=Approval.choices, default=Approval.MANUAL
    )
    # Upstream updatePolicy.evictionRequirements:
    # [{"resources": ["cpu"], "changeRequirement": "TargetHigherThanRequests"}].
    eviction_requirements = models.JSONField(default=list, blank=True)
    source = models.CharField(
        max_length=20, choices=Source.choices, default=Source.VPAWEB
    )
    # The upstream VerticalPodAutoscaler targeting the workload ("namespace/name"), and
    # its spec.updatePolicy.updateMode as upstream reads it (absent or Auto: Recreate);
    # both "" when none does. Set by discovery for every policy, mirrored or vpaweb's
    # own: a vpaweb policy next to an object in a non-Off mode is a conflict.
    vpa_object = models.CharField(max_length=320, blank=True)
    vpa_object_mode = models.CharField(max_length=32, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    objects = PolicyQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "policies"

    def __str__(self) -> str:
        return f"{self.workload}: {self.mode}"

    @property
    def is_off(self) -> bool:
        """Off means off: nothing is ever written to the cluster for this workload."""
        return self.mode == self.Mode.OFF

    @property
    def is_mirrored(self) -> bool:
        """True when the policy mirrors an upstream VPA object (vpaweb never acts)."""
        return self.source == self.Source.VPA_OBJECT

    @property
    def is_actionable(self) -> bool:
        """THE predicate of actuation: may vpaweb (webhook, updater) act on this
        workload's pods? Only when the policy is vpaweb's own and its mode is not Off.
        A mirrored VPA object's policy is never actionable, whatever its mode.
        ``PolicyQuerySet.actionable()`` is the same rule as a filter."""
        return self.source == self.Source.VPAWEB and self.mode != self.Mode.OFF

    @property
    def managed_by(self) -> str:
        """The upstream object a mirrored policy follows, as the dashboard and errors
        name it: ``VerticalPodAutoscaler <namespace>/<name> (mode <mode>)``."""
        name = self.vpa_object or "(name not read yet)"
        return (
            f"VerticalPodAutoscaler {name} (mode {self.vpa_object_mode or self.mode})"
        )

    @property
    def has_vpa_conflict(self) -> bool:
        """A vpaweb policy whose workload an upstream VPA object still acts on (its
        mode is not Off): two updaters would fight over the same pods."""
        return (
            self.source == self.Source.VPAWEB
            and bool(self.vpa_object)
            and self.vpa_object_mode not in ("", self.Mode.OFF)
        )


class RecommendationQuerySet(models.QuerySet["Recommendation"]):
    """Reads over recommendation history."""

    def latest_per_container(self) -> RecommendationQuerySet:
        """Each container's newest recommendation (via the denormalised pointer)."""
        return self.filter(pk__in=Container.objects.values("latest_recommendation_id"))


class Recommendation(models.Model):
    """One recommendation of one container; a new row only when a value changed."""

    container = models.ForeignKey(
        Container, on_delete=models.CASCADE, related_name="recommendations"
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

    objects = RecommendationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # The workload page's history chart: one container's rows by time.
            models.Index(fields=["container", "created_at"], name="rec_container_time"),
        ]

    def __str__(self) -> str:
        return f"{self.container} @ {self.created_at:%Y-%m-%d %H:%M}"

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

    def __str__(self) -> str:
        return f"OOM {self.container} {self.pod} @ {self.occurred_at}"


class RefreshRun(models.Model):
    """One background run (discovery, ingestion, back-fill, recommendation) as a row."""

    class Kind(models.TextChoices):
        REFRESH = "refresh"
        BACKFILL = "backfill"
        EXPIRE = "expire"

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
    progress = models.FloatField(default=0.0)
    counts = models.JSONField(default=dict, blank=True)
    timings = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            # The overview's "last runs" panel.
            models.Index(fields=["-started_at"], name="run_started"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.status} @ {self.started_at:%Y-%m-%d %H:%M:%S}"

    @property
    def duration_s(self) -> float | None:
        """Seconds from start to finish, or None while running."""
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class ResizeChangeStatus(models.TextChoices):
    """Where a ResizeChange is (``ResizeChange.Status``)."""

    PROPOSED = "proposed"
    APPROVED = "approved"
    # The updater is writing it to the cluster (set and cleared by the updater).
    APPLYING = "applying"
    REJECTED = "rejected"
    APPLIED = "applied"
    FAILED = "failed"
    # A pod gone (or replaced) before the change was applied.
    EXPIRED = "expired"
    # A newer recommendation (or none needed any more) replaced it before it applied.
    SUPERSEDED = "superseded"


# THE open statuses of a resize change (``ResizeChange.OPEN_STATUSES``): not yet
# decided, or decided and not yet done. The database holds at most one open change per
# pod (ResizeChange's constraint is built from this tuple); a new status that is still
# "open" is added here, and makemigrations moves the constraint with it.
OPEN_RESIZE_STATUSES: tuple[str, ...] = (
    ResizeChangeStatus.PROPOSED,
    ResizeChangeStatus.APPROVED,
    ResizeChangeStatus.APPLYING,
)


class ResizeChange(models.Model):
    """A proposed resize of a pod's containers: an operator decides, updater applies."""

    Status = ResizeChangeStatus
    OPEN_STATUSES = OPEN_RESIZE_STATUSES

    class Method(models.TextChoices):
        IN_PLACE = "in-place"
        EVICTION = "eviction"

    workload = models.ForeignKey(
        Workload, on_delete=models.CASCADE, related_name="changes"
    )
    pod = models.CharField(max_length=253)
    method = models.CharField(
        max_length=20, choices=Method.choices, default=Method.IN_PLACE
    )
    status = models.CharField(
        max_length=20, choices=Status.choices, default=Status.PROPOSED
    )
    # {"<container>": {"requests": {"cpu": m, "memory": b}, "limits": {...}}}
    resources_before = models.JSONField(default=dict)
    resources_after = models.JSONField(default=dict)
    reason = models.TextField(blank=True)
    priority = models.FloatField(default=0.0)
    created_at = models.DateTimeField(default=timezone.now)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    # The pod's uid when proposed: a pod recreated under the same name is another pod.
    pod_uid = models.CharField(max_length=64, blank=True)
    # Manual or automatic, copied from the policy when proposed.
    approval = models.CharField(max_length=10, default="manual")
    updated_at = models.DateTimeField(default=timezone.now)
    # Apply attempts, and "try later" answers (a PDB's 429, a deferred resize).
    attempts = models.PositiveIntegerField(default=0)
    try_later_count = models.PositiveIntegerField(default=0)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    # When the in-place resize was first seen Deferred / in progress (fallback clocks).
    resize_pending_since = models.DateTimeField(null=True, blank=True)
    resize_in_progress_since = models.DateTimeField(null=True, blank=True)
    verified_at = models.DateTimeField(null=True, blank=True)
    # What the pod (or its replacement) carried when last looked at, same shape.
    observed = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["workload", "status"], name="change_workload_status"),
            models.Index(fields=["status", "-created_at"], name="change_status_time"),
        ]
        constraints = [
            # At most one open change per pod: a second proposal for the same pod
            # while one is open is an IntegrityError, not a race the updater loses.
            models.UniqueConstraint(
                fields=["workload", "pod"],
                condition=models.Q(status__in=OPEN_RESIZE_STATUSES),
                name="resize_change_one_open_per_pod",
            )
        ]

    def __str__(self) -> str:
        return f"resize {self.workload}/{self.pod}: {self.status}"

    @property
    def is_open(self) -> bool:
        """True while the change is proposed, approved or being applied."""
        return self.status in self.OPEN_STATUSES


class UpdaterLock(models.Model):
    """Which worker runs a cluster's updater (a database lease; docs/updater.md)."""

    cluster = models.OneToOneField(
        Cluster, on_delete=models.CASCADE, related_name="updater_lock"
    )
    holder = models.CharField(max_length=200, blank=True)
    acquired_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"updater lock {self.cluster}: {self.holder or '(free)'}"


class ActuationControl(models.Model):
    """The global kill switch for cluster writes (one row; the admin toggles it)."""

    writes_stopped = models.BooleanField(default=False)
    reason = models.TextField(blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        verbose_name = "actuation kill switch"

    def __str__(self) -> str:
        return "cluster writes stopped" if self.writes_stopped else "writes allowed"


class SimulatedPodState(models.Model):
    """What the simulated cluster's writer changed in a pod (resizes, evictions).

    The simulated fleet is a pure function of its seed; writes live here so every
    process (web, workers) sees the same pods. An evicted pod is recreated at once
    under a new uid with the requests admission gave it.
    """

    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="simulated_pods"
    )
    namespace = models.CharField(max_length=63)
    pod = models.CharField(max_length=253)
    # {"<container>": {"requests": {...}, "limits": {...}}} (millicores, bytes)
    containers = models.JSONField(default=dict, blank=True)
    generation = models.PositiveIntegerField(default=1)
    uid_suffix = models.PositiveIntegerField(default=0)
    restarted_at = models.DateTimeField(null=True, blank=True)
    annotations = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "pod"], name="simulated_pod_unique"
            )
        ]

    def __str__(self) -> str:
        return f"simulated pod {self.namespace}/{self.pod}"


class AuditEvent(models.Model):
    """Who did what, when, with the state before and after (services/audit.py)."""

    class Action(models.TextChoices):
        """Every audited action, named ``<object>.<verb>``."""

        POLICY_UPDATE = "policy.update"
        POLICY_IMPORT = "policy.import"
        POLICY_ADOPT = "policy.adopt"
        CHANGE_APPROVE = "change.approve"
        CHANGE_REJECT = "change.reject"
        CHANGE_WITHDRAW = "change.withdraw"
        # The updater's transitions (services/actuation/workflow.py).
        CHANGE_PROPOSE = "change.propose"
        CHANGE_APPLY = "change.apply"
        CHANGE_APPLIED = "change.applied"
        CHANGE_FAIL = "change.fail"
        CHANGE_EXPIRE = "change.expire"
        CHANGE_SUPERSEDE = "change.supersede"
        UPDATER_KILL_SWITCH = "updater.kill_switch"
        UPDATER_PAUSE = "updater.pause"
        TOKEN_CREATE = "token.create"
        TOKEN_REVOKE = "token.revoke"
        USER_CREATE = "user.create"
        USER_ROLE = "user.role"
        COEFFICIENT_UPDATE = "coefficient.update"

    created_at = models.DateTimeField(default=timezone.now)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # The actor as shown (user name, "token:<name>" or "system"), kept if the user goes.
    actor_label = models.CharField(max_length=200, default="system")
    action = models.CharField(max_length=64)
    workload = models.ForeignKey(
        Workload,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_events",
    )
    object_type = models.CharField(max_length=64, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    message = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # The audit page lists newest first, filtered by action.
            models.Index(fields=["action", "-created_at"], name="audit_action_time"),
        ]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_label} {self.action}"


class ApiToken(models.Model):
    """A machine credential for the REST API, read or write; only its hash is stored."""

    class Scope(models.TextChoices):
        READ = "read", "Read"
        WRITE = "write", "Write (change policies, approve or reject changes)"

    name = models.CharField(max_length=100)
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.READ)
    # The first characters of the key, so people can tell tokens apart in lists.
    key_prefix = models.CharField(max_length=16)
    # SHA-256 hex of the whole key: looked up on every API request with a token.
    key_hash = models.CharField(max_length=64, unique=True)
    # The owner: the token acts for this user and never has more rights than they have
    # now; deleting the user deletes their tokens. None = made on the command line.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
    )
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name", "-created_at"]
        constraints = [
            # A name may be reused once the old token is revoked.
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(revoked_at__isnull=True),
                name="api_token_active_name",
            )
        ]

    def __str__(self) -> str:
        return f"token {self.name} ({self.scope})"

    @property
    def is_active(self) -> bool:
        """True until the token is revoked."""
        return self.revoked_at is None

    @property
    def can_write(self) -> bool:
        """Write tokens may change policies and approve or reject changes."""
        return self.scope == self.Scope.WRITE

    @property
    def actor_label(self) -> str:
        """How the token appears in the audit log."""
        return f"token:{self.name}"


class StaticCoefficient(models.Model):
    """First-deploy coefficient for workloads without a recommendation (seed 004).

    ``namespace`` "" is the global default; a namespace's own row wins over it. A
    missing factor leaves that resource's request alone (seed 004 applies CPU only, by
    default).
    """

    namespace = models.CharField(max_length=63, blank=True, unique=True)
    # New request = original request × factor, in (0, 1]; None = leave resource alone.
    cpu_factor = models.FloatField(null=True, blank=True)
    memory_factor = models.FloatField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["namespace"]

    def __str__(self) -> str:
        scope = self.namespace or "(global default)"
        return (
            f"coefficient {scope}: cpu {self.cpu_factor}, memory {self.memory_factor}"
        )


class AdmissionCount(models.Model):
    """How many pods the admission webhook patched, left alone or failed open on, per
    cluster and minute (counted in memory, flushed every few seconds: no write per
    pod)."""

    class Outcome(models.TextChoices):
        PATCHED = "patched"
        LEFT_ALONE = "left_alone"
        FAILED_OPEN = "failed_open"

    cluster_name = models.CharField(max_length=63)
    minute = models.DateTimeField()
    outcome = models.CharField(max_length=12, choices=Outcome.choices)
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster_name", "minute", "outcome"],
                name="admission_count_unique",
            )
        ]
        # The overview sums the last hour and day: a range scan on minute.
        indexes = [models.Index(fields=["minute"], name="admission_count_minute")]

    def __str__(self) -> str:
        return f"{self.cluster_name} {self.minute:%H:%M} {self.outcome}: {self.count}"
