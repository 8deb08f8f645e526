"""Clusters, their workloads, containers, pods and namespace LimitRanges, as discovery
stores them.

Resource amounts are stored as upstream VPA keeps them: CPU in integer millicores,
memory in integer bytes; ``None`` means "not set".
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from recommender.engine.resources import Resources
from recommender.models.provisioning import ContainerQuerySet, WorkloadQuerySet


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
    # Whether an operator allowed vpaweb to write to this cluster at all (updater,
    # drop-in VPA status, Events, webhook registration): off until an admin allows
    # it, audited (services/actuation/control.py, docs/updater.md).
    actuation_allowed = models.BooleanField(default=False)
    # What SelfSubjectAccessReview answered for each write path while actuation is
    # allowed: {"checked_at": iso, "error": str, "paths": {path: {"allowed": bool,
    # "reason": str}}} (services/actuation/permissions.py); {} = not checked yet.
    write_permissions = models.JSONField(default=dict, blank=True)
    # Write paths a 403 stopped, with exponential back-off: {path: {"failures": n,
    # "since": iso, "until": iso, "error": str}}.
    write_backoff = models.JSONField(default=dict, blank=True)
    # When approved changes of this cluster may be applied, as a policy's
    # (services/policy/windows.py): [] = any time.
    maintenance_windows = models.JSONField(default=list, blank=True)
    last_discovered_at = models.DateTimeField(null=True, blank=True)
    # VerticalPodAutoscalers whose target discovery did not find, as of the last pass
    # over their namespace: [{"namespace", "name", "target_kind", "target_name",
    # "message"}] (services/refresh/cluster_objects.py).
    vpa_objects_without_target = models.JSONField(default=list, blank=True)
    # Namespace opt-in (as Goldilocks does): a label selector such as
    # ``vpaweb.io/enabled=true``; only namespaces it selects are read. Empty: the
    # whole cluster (docs/kubernetes.md "Namespace opt-in").
    namespace_selector = models.CharField(max_length=1000, blank=True)
    # The labels of the namespaces discovery listed, {namespace: {key: value}}, for
    # policy rules' namespace selectors; a namespace not listed has only the label
    # the API server always sets (kubernetes.io/metadata.name).
    namespace_labels = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # When the refresh last stored the totals of every namespace (NamespaceTotals);
    # None: never, and the overview computes this cluster's totals as it loads.
    totals_at = models.DateTimeField(null=True, blank=True)
    # Since when the usage source has no OOM series (Prometheus without
    # kube-state-metrics): OOM kills then come from pod statuses only. None: it has
    # them, or keeps no OOM history by design (services/refresh/ooms.py).
    oom_history_missing_since = models.DateTimeField(null=True, blank=True)

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
    # Jobs and CronJobs: the hours per month their pods run, all pods together, from
    # the runs discovery saw (WorkloadPod.started_at/ran_until, the last 8 days); the
    # savings count these hours, not 730 per replica (models.provisioning.pods_billed).
    # None for other kinds, and before any run was seen.
    running_hours_month = models.FloatField(null=True, blank=True)
    # A CronJob's spec.schedule: its forecast runs (services/refresh/cron_hours.py).
    schedule = models.CharField(max_length=253, blank=True, default="")
    # The prices of the nodes its pods run on (mean over the pods the last discovery
    # saw; services/refresh/node_prices.py), and where they came from: "opencost"
    # (the node cost metrics in Prometheus), "table" (VPAWEB_PRICE_TABLE) or
    # "default" (VPAWEB_PRICE_PER_*_HOUR; the prices are then None, so a changed
    # setting applies at once).
    price_per_core_hour = models.FloatField(null=True, blank=True)
    price_per_gib_hour = models.FloatField(null=True, blank=True)
    price_source = models.CharField(max_length=16, default="default", blank=True)
    labels = models.JSONField(default=dict, blank=True)
    # The workload's own vpaweb.io/* annotations as discovery read them: a policy
    # source (services/policy/rules.py).
    policy_annotations = models.JSONField(default=dict, blank=True)
    # False once discovery no longer finds it; kept for its history.
    is_active = models.BooleanField(default=True)
    first_seen_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)
    # What discovery last compared and stored of it: a digest of the adapter's change
    # marker (WorkloadInfo.version) and discovery's code; "" when it had none.
    # Discovery skips the compare of a workload whose digest it finds unchanged
    # (services/refresh/discovery.py).
    discovered_digest = models.CharField(max_length=32, blank=True, default="")
    # HPAs that scale this workload on a resource its policy controls (they would fight
    # vpaweb): [{"name": "<hpa>", "resources": ["cpu", ...], "min_replicas": 1,
    # "max_replicas": 10, "metrics": [{"resource", "container", "target_type",
    # "average_utilization", "average_value"}]}], set by discovery (rows stored before
    # the targets or the replica bounds were read lack "metrics" or the bounds).
    hpa_conflicts = models.JSONField(default=list, blank=True)
    # PodDisruptionBudgets selecting its pods (kube_objects.pdb_of shape), for the
    # updater: [{"name", "min_available", "max_unavailable", ...}], set by discovery.
    pod_disruption_budgets = models.JSONField(default=list, blank=True)
    # Its pods still CPU startup-boosted, as the updater last saw them
    # (services/actuation/boost.py): [{"pod": name, "until": ISO time or None while
    # not Ready}]; the workload page shows "boosted until".
    startup_boosted_pods = models.JSONField(default=list, blank=True)

    objects = WorkloadQuerySet.as_manager()

    class Meta:
        ordering = ["cluster__name", "namespace", "kind", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "kind", "name"],
                name="workload_natural_key",
            )
        ]
        indexes = [
            # The overview's first containers without a recommendation, by
            # namespace and workload name: walked in order instead of sorting
            # every workload (61 ms -> 0.5 ms at 65,000 workloads).
            models.Index(fields=["namespace", "name"], name="workload_namespace_name"),
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
    # The mean request over the workload's live pods (discovery: pods.pods_requests;
    # null without a live pod carrying one): what the potential savings and the
    # requested totals count per pod, so a pod resized in place counts its own
    # request, never the template's (models/provisioning.py, billed_request).
    pods_request_cpu_millicores = models.FloatField(null=True, blank=True)
    pods_request_memory_bytes = models.FloatField(null=True, blank=True)
    # Denormalised pointer to the newest Recommendation: lists need no per-row subquery.
    latest_recommendation = models.ForeignKey(
        "Recommendation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    objects = ContainerQuerySet.as_manager()

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
    # Pods of Jobs (and so of CronJobs): when it started, and the last time discovery
    # saw it Running: the run time the workload's cost counts.
    started_at = models.DateTimeField(null=True, blank=True)
    ran_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="pod_per_namespace"
            )
        ]
        indexes = [models.Index(fields=["workload", "last_seen_at"])]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class SavingsSnapshot(models.Model):
    """A namespace's totals at one hour: the savings trend (docs/dashboard.md).

    Written by the refresh cycle at most once per cluster and hour (every namespace of
    the cluster at once, so the namespaces of one hour add up); the hourly expiry run
    keeps one per day once older than ``VPAWEB_SAVINGS_TREND_HOURLY_DAYS`` and drops
    them after ``VPAWEB_SAVINGS_TREND_DAYS`` (services/readmodels/savings_trend.py).
    """

    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="savings_snapshots"
    )
    namespace = models.CharField(max_length=63)
    # The start of the hour the snapshot belongs to (UTC).
    taken_at = models.DateTimeField()
    workloads = models.IntegerField(default=0)
    requested_cpu_millicores = models.BigIntegerField(default=0)
    requested_memory_bytes = models.BigIntegerField(default=0)
    recommended_cpu_millicores = models.BigIntegerField(default=0)
    recommended_memory_bytes = models.BigIntegerField(default=0)
    savings_monthly = models.FloatField(default=0.0)
    # What the applied changes that still hold save per month (realized.py).
    realized_savings_monthly = models.FloatField(default=0.0)

    class Meta:
        ordering = ["cluster_id", "taken_at", "namespace"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "taken_at"],
                name="savings_snapshot_per_hour",
            )
        ]
        indexes = [models.Index(fields=["taken_at"], name="savings_taken_at")]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.namespace} @ {self.taken_at:%Y-%m-%d %H:%M}"


class ContainerAmounts(models.Model):
    """The amounts the overview and the rollups sum (services/readmodels/rollups.Totals:
    the same names): the (non-init) containers and those with a usable
    recommendation, and over them, times their workload's replicas, the requested and
    recommended CPU and memory (all of them, and of the covered ones)."""

    containers = models.IntegerField(default=0)
    covered = models.IntegerField(default=0)
    requested_cpu_millicores = models.BigIntegerField(default=0)
    requested_memory_bytes = models.BigIntegerField(default=0)
    covered_requested_cpu_millicores = models.BigIntegerField(default=0)
    covered_requested_memory_bytes = models.BigIntegerField(default=0)
    recommended_cpu_millicores = models.BigIntegerField(default=0)
    recommended_memory_bytes = models.BigIntegerField(default=0)

    class Meta:
        abstract = True


class NamespaceTotals(ContainerAmounts):
    """What the dashboard's overview sums over one namespace of a cluster: its
    active workloads' containers, requests, latest recommendations and shortfalls.

    Written by the refresh after each cycle, for the namespaces the cycle refreshed
    (the whole cluster, or its shard's namespace), from the same queries the overview
    runs over clusters without stored totals (``Cluster.totals_at``): one row per
    namespace with an active workload (services/readmodels/namespace_totals.py).
    """

    cluster = models.ForeignKey(
        Cluster, on_delete=models.CASCADE, related_name="namespace_totals"
    )
    namespace = models.CharField(max_length=63)
    computed_at = models.DateTimeField()
    workloads = models.IntegerField(default=0)
    # Of them, those with a (non-init) container missing a CPU or a memory request.
    workloads_missing_requests = models.IntegerField(default=0)
    # Of them, those with a counted shortfall (the size of ``shortfalls``).
    workloads_short = models.IntegerField(default=0)
    # Containers with a latest recommendation, and of those, per confidence band.
    recommendations = models.IntegerField(default=0)
    confidence_low = models.IntegerField(default=0)
    confidence_medium = models.IntegerField(default=0)
    confidence_high = models.IntegerField(default=0)
    # {workload pk (text): its shortfall percent}, for the workloads with a counted
    # shortfall (recommender/models/provisioning.py).
    shortfalls = models.JSONField(default=dict, blank=True)
    # [[workload name, container name, container pk], ...]: the namespace's first
    # containers without a usable recommendation, in that order (at most
    # FIRST_WITHOUT_DATA, services/readmodels/namespace_totals.py).
    first_without_data = models.JSONField(default=list, blank=True)
    # [[price source, workloads, core-hour low, high, GiB-hour low, high], ...]: its
    # active workloads per price source and the range of their stored prices (null
    # where none is stored), by source: the overview's price mix.
    price_mix = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["cluster_id", "namespace"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace"], name="namespace_totals_once"
            )
        ]
        verbose_name_plural = "namespace totals"

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.namespace}"


class WorkloadTotals(models.Model):
    """The parts of one workload's provisioning facts that depend on neither the
    prices nor the time (recommender/models/provisioning.py, ``STORED_PARTS``), so
    the lists filtered or sorted by a fact read a row per workload instead of joining
    every container with its latest recommendation.

    Written by the refresh with its cluster's ``NamespaceTotals``, in the same
    transaction and scope (services/readmodels/workload_totals.py): one row per
    workload of the scope, active or not (the API lists inactive ones). Complete for
    a cluster once ``Cluster.totals_at`` is set; a workload without a row (added since
    by hand) reads as one without containers until the next refresh. Rows are
    rewritten only when a value changed, so there is no time of computation per row:
    ``Cluster.totals_at`` gives it.
    """

    workload = models.OneToOneField(
        Workload, on_delete=models.CASCADE, primary_key=True, related_name="totals"
    )
    # Per pod, the sum over its containers with a target of request - target (the
    # live pods' mean request, models.provisioning.billed_request: fractional when
    # the pods differ; a missing request counts as 0; negative when below the
    # target): the savings are replicas x these x the prices, at read time.
    excess_cpu_millicores = models.FloatField(default=0.0)
    excess_memory_bytes = models.FloatField(default=0.0)
    # The largest counted shortfall percent of its containers (0: none).
    shortfall = models.IntegerField(default=0)
    # Its containers missing a CPU or a memory request, and those without data.
    missing_count = models.IntegerField(default=0)
    no_data_count = models.IntegerField(default=0)
    # The latest OOM kill of those containers (None: none). The lists count the recent
    # kills as they load, since "recent" moves with the time of the request, but only
    # for the workloads whose latest kill is recent: without it, finding those meant
    # reading every recent kill's container (50-80 ms at 100,000 containers).
    latest_oom_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "workload totals"
        indexes = [
            # The rollups' workloads with a stored kill (label_rollups.killed_rows:
            # a recent one; rollups.rollup: any, beside the stored group sums): a
            # few rows found by the index instead of a pass over every workload's.
            models.Index(fields=["latest_oom_at"], name="workloadtotals_latest_oom")
        ]

    def __str__(self) -> str:
        return str(self.workload_id)
