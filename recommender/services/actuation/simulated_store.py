"""The simulated cluster's pods as writes left them, kept in the database.

``DatabasePodStore`` is the ``SimulatedPodStore`` of ``SimulatedWriter``: a resize
stores the containers' new resources, an eviction recreates the pod (a new uid, started
now) with the requests the admission path gives a new pod of its workload: the latest
recommendation capped as the webhook caps it (``updater.new_resources``).
``overrides_of`` hands the stored state back to ``SimulatedCluster`` on every
discovery, so the web process, the workers and the refresh all see the same pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction

from recommender.cluster.base import ClusterSnapshot, PodInfo
from recommender.cluster.simulated import PodOverride
from recommender.cluster.writer import ContainerResize
from recommender.engine.resources import Resources
from recommender.models import Cluster, Container, SimulatedPodState, Workload
from recommender.services.actuation.updater import (
    capped_recommendations,
    new_resources,
)
from recommender.services.advice.limits import limit_ranges_for
from recommender.services.policy_validation import parse_container_policies


def _amounts(data: Mapping[str, Any]) -> Resources:
    return Resources(cpu_millicores=data.get("cpu"), memory_bytes=data.get("memory"))


def overrides_of(cluster: Cluster) -> dict[tuple[str, str], PodOverride]:
    """Every simulated pod a write changed, for ``SimulatedCluster``."""
    out: dict[tuple[str, str], PodOverride] = {}
    for row in SimulatedPodState.objects.filter(cluster=cluster):
        out[(row.namespace, row.pod)] = PodOverride(
            containers={
                name: (
                    _amounts(values.get("requests") or {}),
                    _amounts(values.get("limits") or {}),
                )
                for name, values in (row.containers or {}).items()
            },
            uid_suffix=row.uid_suffix,
            restarted_at=row.restarted_at,
            annotations=dict(row.annotations or {}),
        )
    return out


class DatabasePodStore:
    """A ``SimulatedPodStore`` over ``SimulatedPodState`` rows."""

    def __init__(
        self, *, cluster: Cluster, snapshot: ClusterSnapshot, now: datetime
    ) -> None:
        self.cluster = cluster
        self.now = now
        self.pods: dict[tuple[str, str], tuple[PodInfo, str, str]] = {}
        for info in snapshot.workloads:
            for pod in info.pods:
                self.pods[(pod.namespace, pod.name)] = (pod, info.kind, info.name)

    def exists(self, namespace: str, name: str) -> bool:
        """Whether discovery saw the pod."""
        return (namespace, name) in self.pods

    def _row(self, namespace: str, name: str) -> SimulatedPodState:
        row, _ = SimulatedPodState.objects.select_for_update().get_or_create(
            cluster=self.cluster, namespace=namespace, pod=name
        )
        return row

    def resize(
        self, namespace: str, name: str, containers: tuple[ContainerResize, ...]
    ) -> None:
        """Store the new resources (the resize takes effect at once)."""
        with transaction.atomic():
            row = self._row(namespace, name)
            stored = dict(row.containers or {})
            for container in containers:
                current = stored.get(container.name) or self._current(
                    namespace, name, container.name
                )
                requests = {
                    **(current.get("requests") or {}),
                    **container.requests.to_dict(),
                }
                limits = {**(current.get("limits") or {}), **container.limits.to_dict()}
                stored[container.name] = {"requests": requests, "limits": limits}
            row.containers = stored
            row.generation += 1
            row.updated_at = self.now
            row.save()

    def _current(self, namespace: str, name: str, container: str) -> dict[str, Any]:
        pod = self.pods[(namespace, name)][0]
        for spec in pod.containers:
            if spec.name == container:
                return {
                    "requests": spec.requests.to_dict(),
                    "limits": spec.limits.to_dict(),
                }
        return {}

    def recreate(self, namespace: str, name: str) -> None:
        """Evict and recreate the pod with the admission path's requests."""
        pod, kind, workload_name = self.pods[(namespace, name)]
        admitted = self.admitted_resources(pod, kind, workload_name)
        with transaction.atomic():
            row = self._row(namespace, name)
            # The new pod starts from its template, then admission sets requests.
            row.containers = admitted
            row.uid_suffix += 1
            row.generation = 1
            row.restarted_at = self.now
            row.updated_at = self.now
            row.save()

    def admitted_resources(
        self, pod: PodInfo, kind: str, workload_name: str
    ) -> dict[str, Any]:
        """What admission gives a new pod of the workload (its capped advice)."""
        workload = (
            Workload.objects.filter(
                cluster=self.cluster,
                kind=kind,
                namespace=pod.namespace,
                name=workload_name,
            )
            .select_related("policy")
            .first()
        )
        if workload is None:
            return {}
        latest = {
            c.name: c.latest_recommendation
            for c in Container.objects.filter(
                workload=workload, latest_recommendation__isnull=False
            ).select_related("latest_recommendation")
            if c.latest_recommendation is not None
        }
        policy = getattr(workload, "policy", None)
        policies = parse_container_policies(
            (policy.container_policies if policy else None) or []
        )
        ranges = limit_ranges_for(cluster_id=self.cluster.pk, namespace=pod.namespace)
        capped, _ = capped_recommendations(pod, latest, policies, ranges)
        _, after = new_resources(pod, capped, policies, ranges[0])
        return after

    def annotate(
        self, namespace: str, name: str, annotations: Mapping[str, str | None]
    ) -> None:
        """Merge annotations."""
        with transaction.atomic():
            row = self._row(namespace, name)
            merged = dict(row.annotations or {})
            for key, value in annotations.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            row.annotations = merged
            row.save()
