"""Which pods belong to which workload, and what the live pods really request."""
# Ownership comes from the owner references discovery reads (Pod -> ReplicaSet ->
# Deployment, Pod -> Job -> CronJob; ``cluster.owners``) and is stored
# (``WorkloadPod``), so a pod keeps its workload after it is gone: the usage history of
# the workload page and the ingestion of a vanished pod's samples ask ``PodOwners``,
# the one answer. Only a pod discovery never saw (it started and ended between two
# passes) is placed by its name, and only where its controller's naming rule fits
# exactly (``POD_NAME_RULES``, Kubernetes' generated-name alphabet), longest workload
# name first: Deployment ``api`` never claims pod ``api-migrate-x7k2p`` of Job
# ``api-migrate``.
#
# The API server's LimitRanger fills requests and limits a pod template leaves out;
# ``applied_resources`` takes a container's current values from its live pods and says
# where each came from (``Container.Source``: template, LimitRange default, pod).

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import (
    BooleanField,
    DurationField,
    ExpressionWrapper,
    F,
    Q,
    Sum,
    Value,
)
from django.db.models.functions import Greatest

from recommender.cluster.base import ContainerSpec, PodInfo
from recommender.engine.resources import RESOURCE_NAMES, Resources
from recommender.models import Container, Workload, WorkloadPod
from recommender.models.provisioning import HOURS_PER_MONTH
from recommender.services.refresh import stored_json

# How long a gone pod's owner is kept: the workload page's 8-day usage history.
POD_RETENTION = timedelta(days=8)
# A stored pod row is rewritten at most this often when nothing but its last-seen
# time changed (a refresh runs every minute; retention is counted in days).
TOUCH_EVERY = timedelta(hours=1)
# Kubernetes' alphabet for generated names (k8s.io/apimachinery/pkg/util/rand
# SafeEncodeString): no vowels, no look-alikes.
_SAFE = "[bcdfghjklmnpqrstvwxz2456789]"
# What follows "<workload name>" in the name of a pod its controller created.
POD_NAME_RULES: dict[str, re.Pattern[str]] = {
    # <deployment>-<pod-template-hash>-<5>
    Workload.Kind.DEPLOYMENT: re.compile(rf"-{_SAFE}{{1,10}}-{_SAFE}{{5}}"),
    # <statefulset>-<ordinal>
    Workload.Kind.STATEFUL_SET: re.compile(r"-\d+"),
    # <cronjob>-<scheduled minute>-<5> (through its Job <cronjob>-<minute>)
    Workload.Kind.CRON_JOB: re.compile(rf"-\d+-{_SAFE}{{5}}"),
}
# ReplicaSet, DaemonSet, Job, ReplicationController: <controller>-<5>.
DEFAULT_POD_NAME_RULE = re.compile(rf"-{_SAFE}{{5}}")

PodKey = tuple[str, str]  # (namespace, pod)
# The phase in which a batch run holds its requests on a node.
RUNNING = "Running"
BATCH_KINDS = (Workload.Kind.JOB, Workload.Kind.CRON_JOB)


@dataclass
class PodOwners:
    """The workload id of each pod of a cluster (or of one namespace)."""

    # Pods discovery sees now, and pods it saw before (WorkloadPod rows).
    live: dict[PodKey, int] = field(default_factory=dict)
    stored: dict[PodKey, int] = field(default_factory=dict)
    # Workloads by (namespace, name), inactive ones too: (kind, id).
    by_name: dict[tuple[str, str], list[tuple[str, int]]] = field(default_factory=dict)

    def owner_of(self, namespace: str, pod: str) -> int | None:
        """The workload of ``pod``, or None when no workload's pod it can be."""
        key = (namespace, pod)
        owner = self.live.get(key) or self.stored.get(key)
        if owner is not None:
            return owner
        owner = self._by_controller_naming(namespace, pod)
        if owner is not None:
            self.stored[key] = owner
        return owner

    def _by_controller_naming(self, namespace: str, pod: str) -> int | None:
        parts = pod.split("-")
        for cut in range(len(parts) - 1, 0, -1):
            name = "-".join(parts[:cut])
            rest = pod[len(name) :]
            for kind, workload_id in self.by_name.get((namespace, name), ()):
                rule = POD_NAME_RULES.get(kind, DEFAULT_POD_NAME_RULE)
                if rule.fullmatch(rest):
                    return workload_id
        return None

    def pods_of(
        self, workload_id: int, namespace: str, pods: Iterable[str]
    ) -> set[str]:
        """Which of ``pods`` (names in ``namespace``) belong to ``workload_id``."""
        return {p for p in pods if self.owner_of(namespace, p) == workload_id}


def load_pod_owners(
    *, cluster_id: int, namespace: str | None, now: datetime
) -> PodOwners:
    """The stored owners (within ``POD_RETENTION``) and workload names, two queries."""
    pods = WorkloadPod.objects.filter(
        cluster_id=cluster_id, last_seen_at__gte=now - POD_RETENTION
    )
    workloads = Workload.objects.filter(cluster_id=cluster_id)
    if namespace is not None:
        pods = pods.filter(namespace=namespace)
        workloads = workloads.filter(namespace=namespace)
    owners = PodOwners()
    for ns, name, workload_id in pods.values_list("namespace", "name", "workload_id"):
        owners.stored[(ns, name)] = workload_id
    # Active workloads first: they win a (namespace, name) they share with a gone one.
    for ns, name, kind, workload_id in workloads.order_by(
        "-is_active", "pk"
    ).values_list("namespace", "name", "kind", "pk"):
        owners.by_name.setdefault((ns, name), []).append((kind, workload_id))
    return owners


def _container_resources(pod: PodInfo) -> dict[str, Any]:
    return {
        c.name: {"requests": c.requests.to_dict(), "limits": c.limits.to_dict()}
        for c in pod.containers
    }


def record_pods(
    *,
    cluster_id: int,
    namespace: str | None,
    now: datetime,
    pods: Sequence[tuple[PodInfo, int]],
    batch: int,
    batch_workload_ids: Collection[int] = (),
) -> dict[str, int]:
    """Store the live pods with their workload ids; forget those past retention.
    Pods of ``batch_workload_ids`` (Jobs, CronJobs) also keep when they started and
    until when they were seen Running (``record_running_hours``).

    A pod already stored is rewritten only when its workload or resources changed,
    or its last-seen time is older than ``TOUCH_EVERY``. Returns counts.
    """
    of_shard = WorkloadPod.objects.filter(cluster_id=cluster_id)
    if namespace is not None:
        of_shard = of_shard.filter(namespace=namespace)
    # One statement for the shard's stored pods, whatever their number (a query per
    # batch of names grew with the fleet); kept are the live ones only.
    live = {(pod.namespace, pod.name) for pod, _ in pods}
    # Tuples, not ORM objects: (pk, workload id, containers, due a touch). Whether
    # the last-seen time is due comes from the database, not 100,000 timestamps
    # read into Python every cycle.
    existing: dict[PodKey, tuple[int, int, Any, bool, datetime | None]] = {}
    # The containers' JSON as text, parsed once per distinct text (stored_json.py).
    for pk, ns, name, workload_id, containers, is_due, started_at in of_shard.annotate(
        containers_text=stored_json.as_text("containers"),
        is_due=ExpressionWrapper(
            Q(last_seen_at__lt=now - TOUCH_EVERY), output_field=BooleanField()
        ),
    ).values_list(
        "pk",
        "namespace",
        "name",
        "workload_id",
        "containers_text",
        "is_due",
        "started_at",
    ):
        if (ns, name) in live:
            existing[(ns, name)] = (
                pk,
                workload_id,
                stored_json.parse(containers),
                is_due,
                started_at,
            )
    new_rows: list[WorkloadPod] = []
    changed: list[WorkloadPod] = []
    # Running pods of Jobs: their run time grows every cycle (record_running_hours).
    running: list[WorkloadPod] = []
    for pod, workload_id in pods:
        containers = _container_resources(pod)
        row = existing.get((pod.namespace, pod.name))
        is_batch = workload_id in batch_workload_ids
        is_run = is_batch and pod.phase == RUNNING
        if row is not None and is_run:
            running.append(
                WorkloadPod(
                    pk=row[0], started_at=row[4] or pod.start_time or now, ran_until=now
                )
            )
        if row is None:
            new_rows.append(
                WorkloadPod(
                    cluster_id=cluster_id,
                    workload_id=workload_id,
                    namespace=pod.namespace,
                    name=pod.name,
                    uid=pod.uid,
                    owner_kind=pod.owner_kind,
                    owner_name=pod.owner_name,
                    containers=containers,
                    limit_ranger=pod.limit_ranger,
                    first_seen_at=now,
                    last_seen_at=now,
                    started_at=(pod.start_time or now) if is_batch else None,
                    ran_until=now if is_run else None,
                )
            )
        elif row[1] != workload_id or row[2] != containers or row[3]:
            changed.append(
                WorkloadPod(
                    pk=row[0],
                    workload_id=workload_id,
                    containers=containers,
                    uid=pod.uid,
                    owner_kind=pod.owner_kind,
                    owner_name=pod.owner_name,
                    limit_ranger=pod.limit_ranger,
                    last_seen_at=now,
                )
            )
    WorkloadPod.objects.bulk_create(new_rows, batch_size=batch, ignore_conflicts=True)
    WorkloadPod.objects.bulk_update(
        changed,
        [
            "workload_id",
            "containers",
            "uid",
            "owner_kind",
            "owner_name",
            "limit_ranger",
            "last_seen_at",
        ],
        batch_size=batch,
    )
    WorkloadPod.objects.bulk_update(
        running, ["started_at", "ran_until"], batch_size=batch
    )
    forgotten, _ = of_shard.filter(last_seen_at__lt=now - POD_RETENTION).delete()
    return {"pods_new": len(new_rows), "pods_forgotten": forgotten}


def record_running_hours(
    *, cluster_id: int, namespace: str | None, now: datetime
) -> int:
    """Set ``Workload.running_hours_month`` of the shard's Jobs and CronJobs from
    the runs of their pods discovery saw: the pod-hours run within the last
    ``POD_RETENTION`` (since the workload was first seen, if later), per 730-hour
    month. A batch workload with no run seen yet gets 0. Returns the rows changed.

    One grouped statement over the pods and one update per changed workload.
    """
    window_start = now - POD_RETENTION
    workloads = Workload.objects.filter(
        cluster_id=cluster_id, is_active=True, kind__in=BATCH_KINDS
    )
    if namespace is not None:
        workloads = workloads.filter(namespace=namespace)
    # Observed from the later of the window's start and the workload's first sight.
    begin = Greatest(F("started_at"), F("workload__first_seen_at"), Value(window_start))
    ran = dict(
        WorkloadPod.objects.filter(
            workload__in=workloads, ran_until__gt=window_start, started_at__isnull=False
        )
        .order_by()
        .values("workload_id")
        .annotate(
            ran=Sum(
                ExpressionWrapper(F("ran_until") - begin, output_field=DurationField())
            )
        )
        .values_list("workload_id", "ran")
    )
    changed = []
    for workload in workloads.only("pk", "first_seen_at", "running_hours_month"):
        span_s = (now - max(window_start, workload.first_seen_at)).total_seconds()
        ran_s = max(ran[workload.pk].total_seconds(), 0.0) if workload.pk in ran else 0
        hours = 0.0 if span_s <= 0 else ran_s / span_s * HOURS_PER_MONTH
        if workload.running_hours_month is None or (
            abs(workload.running_hours_month - hours) > 1e-6
        ):
            workload.running_hours_month = hours
            changed.append(workload)
    Workload.objects.bulk_update(changed, ["running_hours_month"], batch_size=500)
    return len(changed)


@dataclass(frozen=True)
class AppliedResources:
    """A container's current requests and limits, and where each came from."""

    requests: Resources
    limits: Resources
    template: dict[str, dict[str, int]]
    sources: dict[str, str]  # "requests.cpu" -> Container.Source value


def representative_pods(pods: Sequence[PodInfo]) -> dict[str, PodInfo]:
    """By container name, the pod whose values stand for the workload's: a running
    one first, by name (one pass over the workload's pods for all its containers)."""
    running: dict[str, PodInfo] = {}
    having: dict[str, PodInfo] = {}
    for pod in sorted(pods, key=lambda p: p.name):
        for container in pod.containers:
            having.setdefault(container.name, pod)
            if pod.phase == "Running":
                running.setdefault(container.name, pod)
    return having | running


def applied_resources(spec: ContainerSpec, pod: PodInfo | None) -> AppliedResources:
    """What ``spec``'s container carries in the workload's live pods, as ``pod``
    (its ``representative_pods`` entry) carries it.

    Without a live pod the template's values stand (source "template"). With one, a
    value LimitRanger says it set is a LimitRange default, one equal to the
    template's is the template's, and any other was set on the pod (an admission
    webhook, an in-place resize).
    """
    template = {
        "requests": spec.requests.to_dict(),
        "limits": spec.limits.to_dict(),
    }
    current = None
    if pod is not None:
        current = next(c for c in pod.containers if c.name == spec.name)
    amounts: dict[str, Resources] = {}
    sources: dict[str, str] = {}
    for kind, singular in (("requests", "request"), ("limits", "limit")):
        own: Resources = getattr(spec, kind)
        live: Resources = own if current is None else getattr(current, kind)
        amounts[kind] = live
        for resource in RESOURCE_NAMES:
            value = live.get(resource)
            if value is None:
                continue
            if pod is not None and (spec.name, singular, resource) in (
                pod.limit_ranger_set
            ):
                source = Container.Source.LIMIT_RANGE
            elif value == own.get(resource):
                source = Container.Source.TEMPLATE
            else:
                source = Container.Source.POD
            sources[f"{kind}.{resource}"] = source.value
    return AppliedResources(
        requests=amounts["requests"],
        limits=amounts["limits"],
        template=template,
        sources=sources,
    )
