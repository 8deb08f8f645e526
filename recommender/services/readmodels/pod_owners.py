"""Which workload a pod belongs to, as stored: ``PodOwners``, ``load_pod_owners``.

Ownership comes from the owner references discovery reads and stores (``WorkloadPod``,
written by ``refresh/pods.py``), so a pod keeps its workload after it is gone: the
workload page's usage history and the ingestion of a vanished pod's samples ask
``PodOwners``, the one answer. Only a pod discovery never saw is placed by its name,
and only where its controller's naming rule fits exactly (``POD_NAME_RULES``,
Kubernetes' generated-name alphabet), longest workload name first: Deployment ``api``
never claims pod ``api-migrate-x7k2p`` of Job ``api-migrate``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from recommender.models import Workload, WorkloadPod
from recommender.models.bulk import STREAM_ROWS

# How long a gone pod's owner is kept: the workload page's 8-day usage history.
POD_RETENTION = timedelta(days=8)
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
    *,
    cluster_id: int,
    namespace: str | None,
    now: datetime,
    live: dict[PodKey, int] | None = None,
    stored: dict[PodKey, int] | None = None,
    workloads: Iterable[tuple[str, str, str, int, bool]] | None = None,
) -> PodOwners:
    """The stored owners (within ``POD_RETENTION``) and workload names, two queries;
    with ``live`` (the pods discovery sees now), those are the live owners and their
    stored rows are not kept (``owner_of`` asks ``live`` first). With ``stored``
    (the other pods' owners, as discovery read them with the pod rows it keeps:
    ``refresh/pods.record_pods``) the pods are not read again, and with
    ``workloads`` (every stored workload of the shard as namespace, name, kind, pk,
    is_active: discovery's read, when it wrote none) nor are the workloads."""
    pods = WorkloadPod.objects.filter(
        cluster_id=cluster_id, last_seen_at__gte=now - POD_RETENTION
    )
    of_shard = Workload.objects.filter(cluster_id=cluster_id)
    if namespace is not None:
        pods = pods.filter(namespace=namespace)
        of_shard = of_shard.filter(namespace=namespace)
    owners = PodOwners(live=live if live is not None else {})
    if stored is not None:
        owners.stored = stored
    else:
        # Streamed (a server-side cursor on PostgreSQL), not read whole: a fleet's
        # pods.
        for ns, name, workload_id in pods.values_list(
            "namespace", "name", "workload_id"
        ).iterator(chunk_size=STREAM_ROWS):
            if (ns, name) not in owners.live:
                owners.stored[(sys.intern(ns), name)] = workload_id
    # Active workloads first: they win a (namespace, name) they share with a gone one.
    if workloads is None:
        named: Iterable[tuple[str, str, str, int]] = (
            of_shard.order_by("-is_active", "pk")
            .values_list("namespace", "name", "kind", "pk")
            .iterator(chunk_size=STREAM_ROWS)
        )
    else:
        named = (
            row[:4] for row in sorted(workloads, key=lambda row: (not row[4], row[3]))
        )
    for ns, name, kind, workload_id in named:
        owners.by_name.setdefault((ns, name), []).append((kind, workload_id))
    return owners
