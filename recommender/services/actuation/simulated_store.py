"""The simulated cluster's pods as writes left them, kept in the database."""
# ``DatabasePodStore`` is the ``SimulatedPodStore`` of ``SimulatedWriter``: a resize
# stores the containers' new resources; an eviction recreates the pod (a new uid,
# started now) as its controller would, **through the admission path**: the Pod its
# controller submits (the workload's template) goes to ``admit``, the admission
# webhook's own service in-process (``services/admission/review.simulated_admission``:
# the same decision, policy, capping and patch as ``POST /mutate``, counted as an
# admission), and the pod keeps the requests, limits and annotations the answer's patch
# gives it. Nothing of the updater's own advice is used, so a recreated pod gets exactly
# what the webhook would set (and the template's requests when the webhook leaves it
# alone or fails open). ``overrides_of`` hands the stored state back to
# ``SimulatedCluster`` on every discovery, so the web process, the workers and the
# refresh all see the same pods.

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction

from recommender.cluster.base import ClusterSnapshot, PodInfo, WorkloadInfo
from recommender.cluster.simulated import PodOverride
from recommender.cluster.simulated_admission import Admit, admit_new_pod
from recommender.cluster.writer import ContainerResize
from recommender.engine.resources import Resources
from recommender.models import Cluster, SimulatedPodState


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
        self,
        *,
        cluster: Cluster,
        snapshot: ClusterSnapshot,
        now: datetime,
        admit: Admit,
    ) -> None:
        self.cluster = cluster
        self.now = now
        self.admit = admit
        self.pods: dict[tuple[str, str], tuple[PodInfo, WorkloadInfo]] = {}
        for info in snapshot.workloads:
            for pod in info.pods:
                self.pods[(pod.namespace, pod.name)] = (pod, info)

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
        """Evict the pod; its controller recreates it through admission."""
        _, info = self.pods[(namespace, name)]
        admitted = admit_new_pod(
            namespace=namespace,
            name=name,
            workload_kind=info.kind,
            workload_name=info.name,
            labels=info.labels,
            template=info.containers,
            admit=self.admit,
        )
        with transaction.atomic():
            row = self._row(namespace, name)
            # The new pod starts from its template, as admission left it: every
            # container's requests and limits, and the webhook's annotations (the
            # old pod's annotations go with it).
            row.containers = {
                c.name: {"requests": c.requests.to_dict(), "limits": c.limits.to_dict()}
                for c in admitted.containers
            }
            row.annotations = admitted.annotations
            row.uid_suffix += 1
            row.generation = 1
            row.restarted_at = self.now
            row.updated_at = self.now
            row.save()
