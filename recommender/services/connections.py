"""The composition root: the one place a ``Cluster`` row becomes a cluster adapter, a
usage source or a ``ClusterWriter`` (``cluster_adapter_for``, ``usage_source_for``,
``cluster_writer_for``); services never construct one. It sits at the top of services:
it wires the webhook's own service (``admission.review.in_process_admission``) into the
simulated cluster, and keeps that cluster's written pods (``DatabasePodStore``,
``overrides_of``) here, the only code that needs them, so nothing it imports imports
it back. A writer is handed out only to a cluster an operator allowed to act, or to
register the webhook itself (``registration=True``): "Off means off" has one door.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from recommender.cluster.base import (
    ClusterAdapter,
    ClusterSnapshot,
    PodInfo,
    WorkloadInfo,
)
from recommender.cluster.kube_writer import KubernetesWriter
from recommender.cluster.kubernetes import KubernetesAdapter
from recommender.cluster.simulated import PodOverride, SimulatedCluster, build_fleet
from recommender.cluster.simulated_admission import Admit, admit_new_pod
from recommender.cluster.simulated_hpas import HpaOverride, with_override
from recommender.cluster.simulated_writer import SimulatedWriter
from recommender.cluster.writer import ClusterWriter, ContainerResize
from recommender.engine.resources import Resources
from recommender.errors import Conflict, InvalidInput
from recommender.models import (
    Cluster,
    SimulatedHpaState,
    SimulatedPodState,
    SimulatedWorkloadState,
)
from recommender.services.admission.review import in_process_admission
from recommender.sources.base import UsageSource
from recommender.sources.metrics_server import MetricsServerSource
from recommender.sources.prometheus import PrometheusSource
from recommender.sources.prometheus_config import PrometheusConfig
from recommender.sources.simulated import SimulatedUsageSource

logger = logging.getLogger(__name__)


def cluster_adapter_for(
    cluster: Cluster,
    *,
    now: datetime | None = None,
    namespace: str | None = None,
    flush_admissions: bool = True,
) -> ClusterAdapter:
    """The (read-only) adapter of ``cluster``, or of one of its namespaces (a shard).

    ``flush_admissions=False``: a simulated cluster's admissions of new pods are
    counted in memory only; the caller flushes them (``cycle.discover_and_store``
    does, once per pass, instead of a statement per pod).

    ``now`` is when the simulated cluster is observed (its pods come and go with
    time); a real cluster is always observed as it is. With ``namespace`` the adapter
    lists only that namespace, so a shard never reads the whole cluster.
    """
    if cluster.kind == Cluster.Kind.SIMULATED:
        fleet = build_fleet(settings.SIMULATION_SEED, settings.SIMULATION_WORKLOADS)
        return SimulatedCluster(
            name=cluster.name,
            fleet=fleet,
            now=now or timezone.now(),
            namespace=namespace,
            # New pods go through the webhook's service, as in a real cluster.
            admit=in_process_admission(cluster.name, flush=flush_admissions),
            admit_window_s=2.0 * settings.REFRESH_INTERVAL_S,
            # Resizes and evictions the updater wrote (services/actuation).
            overrides=overrides_of(cluster),
            namespace_selector=cluster.namespace_selector,
            # HPA targets it patched (coordinated HPA mode).
            hpa_overrides=hpa_overrides_of(cluster),
            # Workloads' annotations (``kubectl annotate`` on a real cluster).
            annotations={
                (row.namespace, row.kind, row.name): dict(row.annotations or {})
                for row in SimulatedWorkloadState.objects.filter(cluster=cluster)
            },
        )
    if cluster.kind == Cluster.Kind.KUBERNETES:
        return KubernetesAdapter(
            cluster_name=cluster.name,
            context=cluster.context,
            namespace=namespace,
            namespace_selector=cluster.namespace_selector,
        )
    raise InvalidInput(
        f"cluster {cluster.name!r}: no adapter for kind {cluster.kind!r}", field="kind"
    )


def kubernetes_version(cluster: Cluster) -> str:
    """Read ``cluster`` once (a row not saved yet, too) and return its Kubernetes
    version; SourceUnavailable, naming the cluster and what failed, when it cannot."""
    adapter = KubernetesAdapter(
        cluster_name=cluster.name,
        context=cluster.context,
        namespace_selector=cluster.namespace_selector,
    )
    try:
        return adapter.check_connection()
    finally:
        adapter.close()


def usage_source_for(cluster: Cluster) -> UsageSource:
    """The source of usage history for ``cluster``."""
    if cluster.kind == Cluster.Kind.SIMULATED:
        fleet = build_fleet(settings.SIMULATION_SEED, settings.SIMULATION_WORKLOADS)
        return SimulatedUsageSource(fleet=fleet)
    if cluster.kind == Cluster.Kind.KUBERNETES and settings.PROMETHEUS_URL:
        # History (8-day back-fill, OOM kills) from Prometheus when one is configured.
        return PrometheusSource(PrometheusConfig.from_settings())
    if cluster.kind == Cluster.Kind.KUBERNETES:
        # No Prometheus: live samples from metrics-server, no history (as upstream).
        return MetricsServerSource(cluster_name=cluster.name, context=cluster.context)
    raise InvalidInput(
        f"cluster {cluster.name!r}: no usage source for kind {cluster.kind!r}",
        field="kind",
    )


def close_quietly(*resources: object) -> None:
    """Close adapters and sources that have ``close()``; a failing close is logged."""
    for resource in resources:
        close = getattr(resource, "close", None)
        if close is None:
            continue
        try:
            close()
        except Exception:
            logger.warning("closing %r failed", resource, exc_info=True)


def cluster_writer_for(
    cluster: Cluster,
    *,
    snapshot: ClusterSnapshot | None = None,
    now: datetime | None = None,
    registration: bool = False,
    kubeconfig: str | None = None,
) -> ClusterWriter:
    """The writer of ``cluster``: the one factory of ``ClusterWriter``.

    For the updater (the default): Conflict unless an operator allowed the cluster to
    act; a simulated cluster's writer holds ``snapshot`` (what discovery saw at
    ``now``). ``registration=True``: the webhook registering itself in a Kubernetes
    cluster (``kubeconfig``: another file than the default), not gated on actuation.
    """
    if registration:
        if cluster.kind != Cluster.Kind.KUBERNETES:
            raise InvalidInput(
                f"cluster {cluster.name!r} is not a Kubernetes cluster", field="cluster"
            )
        # The updater's methods of ClusterWriter are added to KubernetesWriter with it.
        return cast(
            ClusterWriter,
            KubernetesWriter(
                cluster_name=cluster.name,
                context=cluster.context,
                kubeconfig=kubeconfig,
            ),
        )
    if not cluster.actuation_allowed:
        raise Conflict(f"actuation is not allowed for cluster {cluster.name}")
    if cluster.kind == Cluster.Kind.SIMULATED:
        if snapshot is None or now is None:
            raise InvalidInput("a simulated cluster's writer needs snapshot and now")
        when = now
        # An evicted pod is recreated through the admission webhook's own service.
        return SimulatedWriter(
            store=DatabasePodStore(
                cluster=cluster,
                snapshot=snapshot,
                now=when,
                admit=in_process_admission(cluster.name, clock=lambda: when),
            )
        )
    if cluster.kind == Cluster.Kind.KUBERNETES:
        return KubernetesWriter(cluster_name=cluster.name, context=cluster.context)
    raise InvalidInput(
        f"cluster {cluster.name!r}: no writer for kind {cluster.kind!r}", field="kind"
    )


# --- The simulated cluster's pods as writes left them (SimulatedPodState rows) ------


def _amounts(data: Mapping[str, Any]) -> Resources:
    return Resources(cpu_millicores=data.get("cpu"), memory_bytes=data.get("memory"))


def hpa_overrides_of(cluster: Cluster) -> dict[tuple[str, str], HpaOverride]:
    """Every simulated HPA a write changed, for ``SimulatedCluster``."""
    return {
        (row.namespace, row.name): HpaOverride(
            metrics=tuple(row.metrics or ()), resource_version=row.resource_version
        )
        for row in SimulatedHpaState.objects.filter(cluster=cluster)
    }


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
    """A ``SimulatedPodStore`` over ``SimulatedPodState`` rows: a resize stores the
    containers' new resources; an eviction recreates the pod (a new uid, started now)
    as its controller would, through ``admit`` (the webhook's own service), so it
    keeps exactly what the webhook's patch gives it. ``overrides_of`` hands the rows
    back to ``SimulatedCluster`` on every discovery, so every process sees the same
    pods."""

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

    def hpa(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The fleet's HPA as the writer left it, or None."""
        fleet = build_fleet(settings.SIMULATION_SEED, settings.SIMULATION_WORKLOADS)
        for obj in fleet.hpas:
            meta = obj["metadata"]
            if (meta["namespace"], meta["name"]) == (namespace, name):
                override = hpa_overrides_of(self.cluster).get((namespace, name))
                return copy.deepcopy(with_override(obj, override))
        return None

    def set_hpa_metrics(
        self, namespace: str, name: str, metrics: list[dict[str, Any]]
    ) -> int:
        """Store the HPA's metrics; its new resourceVersion."""
        with transaction.atomic():
            row, _ = SimulatedHpaState.objects.select_for_update().get_or_create(
                cluster=self.cluster, namespace=namespace, name=name
            )
            row.metrics = metrics
            row.resource_version += 1
            row.updated_at = self.now
            row.save()
        return row.resource_version

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
