"""The real Kubernetes cluster adapter: discovery of workloads, pods, OOM kills, VPA
objects, HPAs, PodDisruptionBudgets and LimitRanges, read-only.

One ``discover()`` lists each resource type once (paginated, see ``kube_client``) and
joins them in memory: owner chains come from the listed controllers, never from a
request per pod. The adapter never writes: it issues GET requests only, whatever the
workload's mode."""
# What it reports (docs/kubernetes.md has the operator's view):
# - workloads: every top-most well-known controller (Deployment, StatefulSet, DaemonSet,
#   ReplicaSet, Job, CronJob, ReplicationController) with its template's containers; a
#   ReplicaSet of a Deployment or a Job of a CronJob is not a workload of its own;
# - pods: the live ones (not Succeeded or Failed) under their top controller, with
#   current requests (``status.containerStatuses[].resources`` over the spec);
# - OOM kills from every pod's container statuses, and memory evictions from ``Evicted``
#   events;
# - VPA objects, HPAs (with the resources they scale on, also set on the target
#   workload), PDBs and LimitRanges (shapes in ``kube_objects``).
#
# With a ``namespace_selector`` (the cluster's namespace opt-in, e.g.
# ``vpaweb.io/enabled=true``) the adapter first lists the namespaces that selector picks
# (``labelSelector``) and then lists every resource in each of them only, so nothing of
# another namespace is read.
#
# An object that cannot be read (say, an unparsable quantity) is skipped, logged, and
# listed in ``ClusterSnapshot.warnings``; a resource that cannot be listed fails the
# whole pass with ``SourceUnavailable``, so nothing stored is replaced by a partial
# view.

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from kubernetes import client as k8s

from recommender.cluster import kube_client, kube_objects
from recommender.cluster.base import (
    ClusterSnapshot,
    OomKill,
    PodInfo,
    VpaObject,
    WorkloadKey,
)
from recommender.cluster.kube_client import KubeClientSettings, ResourceType
from recommender.cluster.nodes import (
    DAEMONSET,
    FROM_API_SERVER,
    NodeListing,
    NodeRecord,
    PodRequests,
)
from recommender.cluster.owners import OwnerIndex
from recommender.errors import SourceUnavailable

logger = logging.getLogger(__name__)

# The controllers vpaweb can right-size, with the resource that lists each.
WORKLOAD_RESOURCES: dict[str, ResourceType] = {
    "Deployment": kube_client.DEPLOYMENTS,
    "StatefulSet": kube_client.STATEFUL_SETS,
    "DaemonSet": kube_client.DAEMON_SETS,
    "ReplicaSet": kube_client.REPLICA_SETS,
    "Job": kube_client.JOBS,
    "CronJob": kube_client.CRON_JOBS,
    "ReplicationController": kube_client.REPLICATION_CONTROLLERS,
}
# The kubelet's memory evictions; the field selector keeps the (large) event list small.
EVICTION_EVENTS_SELECTOR = "involvedObject.kind=Pod,reason=Evicted"

Obj = dict[str, Any]


class KubernetesAdapter:
    """Reads one Kubernetes cluster with the official client (a ``ClusterAdapter``)."""

    def __init__(
        self,
        *,
        cluster_name: str,
        context: str = "",
        kubeconfig: str | None = None,
        namespace: str | None = None,
        namespace_selector: str = "",
        settings: KubeClientSettings | None = None,
        api_client: k8s.ApiClient | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.cluster_name = cluster_name
        self.namespace = namespace or None
        self.namespace_selector = namespace_selector
        # The namespaces this pass reads (None: across all namespaces), once listed.
        self._scopes: list[str | None] | None = None
        # The labels of the namespaces listed for the opt-in (policy rules match
        # them); empty without an opt-in selector.
        self._namespace_labels: dict[str, dict[str, str]] = {}
        self.reader = kube_client.open_reader(
            cluster_name=cluster_name,
            context=context,
            kubeconfig=kubeconfig,
            settings=settings,
            api_client=api_client,
            sleep=sleep,
        )

    def close(self) -> None:
        """Release the HTTP connections."""
        self.reader.close()

    def check_connection(self) -> str:
        """Prove the cluster can be read (its version, one pod); returns the version."""
        version = self.reader.server_version()
        self.reader.probe(kube_client.PODS)
        if self.namespace_selector:
            self.opted_in_namespaces()
        return version

    def opted_in_namespaces(self) -> list[str]:
        """The namespaces the selector picks (a ``labelSelector`` list), sorted."""
        items = self.reader.list(
            kube_client.NAMESPACES, label_selector=self.namespace_selector
        )
        metas = [item.get("metadata") or {} for item in items or ()]
        self._namespace_labels = {
            str(meta.get("name", "")): dict(meta.get("labels") or {}) for meta in metas
        }
        return sorted(str(meta.get("name", "")) for meta in metas)

    def _scopes_to_read(self) -> list[str | None]:
        """Where to list: across namespaces, the shard, or each opted-in namespace."""
        if self._scopes is None:
            if not self.namespace_selector:
                self._scopes = [self.namespace]
            else:
                self._scopes = [
                    name
                    for name in self.opted_in_namespaces()
                    if self.namespace is None or name == self.namespace
                ]
        return self._scopes

    def _list(
        self, resource: ResourceType, *, missing_ok: bool = False, **options: Any
    ) -> list[Obj] | None:
        items: list[Obj] = []
        for scope in self._scopes_to_read():
            found = self.reader.list(
                resource, namespace=scope, missing_ok=missing_ok, **options
            )
            if found is None:
                return None  # not served (missing_ok): the same in every namespace
            items.extend(found)
        return items

    def discover(self) -> ClusterSnapshot:
        """List workloads, pods, OOM kills and policy objects."""
        warnings: list[str] = []
        self._scopes = None  # list the opted-in namespaces again on every pass
        controllers = {
            kind: self._list(resource) or []
            for kind, resource in WORKLOAD_RESOURCES.items()
        }
        pods = self._list(kube_client.PODS) or []
        # No VPA CRD installed is normal: then there are simply no VPA objects to
        # import.
        vpa_items = self._list(kube_client.VERTICAL_POD_AUTOSCALERS, missing_ok=True)
        hpa_items = self._list(kube_client.HORIZONTAL_POD_AUTOSCALERS) or []
        pdb_items = self._list(kube_client.POD_DISRUPTION_BUDGETS) or []
        limit_range_items = self._list(kube_client.LIMIT_RANGES) or []
        events = (
            self._list(kube_client.EVENTS, field_selector=EVICTION_EVENTS_SELECTOR)
            or []
        )

        index = OwnerIndex(controllers)
        hpas = _parse_all(kube_objects.hpa_of, hpa_items, warnings)
        hpa_resources: dict[WorkloadKey, set[str]] = defaultdict(set)
        for hpa in hpas:
            target = (hpa["namespace"], hpa["target_kind"], hpa["target_name"])
            hpa_resources[target].update(hpa["scaled_resources"])

        pods_by_workload: dict[WorkloadKey, list[PodInfo]] = defaultdict(list)
        workload_of_pod: dict[tuple[str, str], WorkloadKey] = {}
        oom_kills: list[OomKill] = []
        unowned = 0
        for pod in pods:
            try:
                info = kube_objects.pod_of(pod)
            except ValueError as exc:
                _warn(warnings, self.cluster_name, str(exc))
                continue
            top = index.top_controller("Pod", pod)
            key: WorkloadKey | None = None
            if top is None:
                unowned += 1
            else:
                meta = top[1].get("metadata") or {}
                key = (meta.get("namespace", ""), top[0], meta.get("name", ""))
                workload_of_pod[(info.namespace, info.name)] = key
                if kube_objects.is_live(info):
                    pods_by_workload[key].append(info)
            try:
                oom_kills.extend(
                    kube_objects.oom_kills_of_pod(
                        pod,
                        info,
                        workload_kind=key[1] if key else "",
                        workload_name=key[2] if key else "",
                    )
                )
            except ValueError as exc:
                _warn(warnings, self.cluster_name, str(exc))

        for event in events:
            try:
                evictions = kube_objects.evictions_of_event(event)
            except ValueError as exc:
                _warn(warnings, self.cluster_name, str(exc))
                continue
            for kill in evictions:
                key = workload_of_pod.get((kill.namespace, kill.pod))
                if key is not None:
                    kill = replace(kill, workload_kind=key[1], workload_name=key[2])
                oom_kills.append(kill)

        workloads = []
        for kind, objects in controllers.items():
            for obj in objects:
                top = index.top_controller(kind, obj)
                if top is None or top[1] is not obj:
                    # Owned by another well-known controller: part of that workload.
                    continue
                meta = obj.get("metadata") or {}
                key = (meta.get("namespace", ""), kind, meta.get("name", ""))
                try:
                    workloads.append(
                        kube_objects.workload_of(
                            kind,
                            obj,
                            pods=sorted(
                                pods_by_workload.get(key, ()), key=lambda p: p.name
                            ),
                            hpa_scaled_resources=hpa_resources.get(key, ()),
                        )
                    )
                except ValueError as exc:
                    _warn(warnings, self.cluster_name, str(exc))
        workloads.sort(key=lambda w: (w.namespace, w.kind, w.name))

        vpas: list[VpaObject] = _parse_all(
            kube_objects.vpa_of, vpa_items or [], warnings
        )
        snapshot = ClusterSnapshot(
            workloads=tuple(workloads),
            oom_kills=tuple(
                sorted(oom_kills, key=lambda k: (k.occurred_at, k.pod, k.container))
            ),
            vpas=tuple(vpas),
            limit_ranges=tuple(
                _parse_all(kube_objects.limit_range_of, limit_range_items, warnings)
            ),
            pod_disruption_budgets=tuple(
                _parse_all(kube_objects.pdb_of, pdb_items, warnings)
            ),
            horizontal_pod_autoscalers=tuple(hpas),
            warnings=tuple(warnings),
            namespace_labels=dict(self._namespace_labels),
            # What the updater may resize in place depends on it (memory limits).
            server_version=self.reader.server_version(),
        )
        logger.info(
            "cluster %s: discovered %d workloads, %d pods (%d without a workload), "
            "%d OOM kills, %d VPAs, %d HPAs, %d PDBs, %d LimitRanges, %d warnings, "
            "%d requests",
            self.cluster_name,
            len(workloads),
            len(pods),
            unowned,
            len(oom_kills),
            len(vpas),
            len(hpas),
            len(pdb_items),
            len(limit_range_items),
            len(warnings),
            self.reader.request_count,
        )
        return snapshot

    def list_nodes(self, snapshot: ClusterSnapshot) -> NodeListing:
        """The cluster's Node objects (``GET /api/v1/nodes``, paginated) and the
        snapshot's live pods on them; a node that cannot be read is skipped. A list
        the API server refuses (403: the read role has no ``list nodes``) or cannot
        answer gives no nodes and the reason. The pods are None when this adapter
        reads only some namespaces (the others' pods on the nodes are unknown)."""
        try:
            items = self.reader.list(kube_client.NODES) or []
        except SourceUnavailable as exc:
            logger.warning("cluster %s: nodes not listed: %s", self.cluster_name, exc)
            return NodeListing(source=FROM_API_SERVER, nodes=None, problem=str(exc))
        nodes: list[NodeRecord] = []
        for item in items:
            try:
                nodes.append(kube_objects.node_of(item))
            except ValueError as exc:
                logger.warning("cluster %s: skipped %s", self.cluster_name, exc)
        sees_every_pod = self.namespace is None and not self.namespace_selector
        return NodeListing(
            source=FROM_API_SERVER,
            nodes=tuple(nodes),
            pods=_pods_on_nodes(snapshot) if sees_every_pod else None,
        )


def _pods_on_nodes(snapshot: ClusterSnapshot) -> tuple[PodRequests, ...]:
    """The snapshot's scheduled live pods with their containers' requests (init
    containers left out)."""
    return tuple(
        PodRequests(
            namespace=pod.namespace,
            name=pod.name,
            node=pod.node_name,
            containers={
                c.name: (c.requests.cpu_millicores or 0, c.requests.memory_bytes or 0)
                for c in pod.containers
                if c.kind != "init"
            },
            owner_kind=DAEMONSET if workload.kind == DAEMONSET else "",
            owner_name=workload.name,
        )
        for workload in snapshot.workloads
        for pod in workload.pods
        if pod.node_name
    )


def _warn(warnings: list[str], cluster_name: str, message: str) -> None:
    logger.warning("cluster %s: skipped %s", cluster_name, message)
    warnings.append(message)


def _parse_all(
    parse: Callable[[Obj], Any], items: Iterable[Obj], warnings: list[str]
) -> list[Any]:
    result = []
    for item in items:
        try:
            result.append(parse(item))
        except (ValueError, TypeError, KeyError) as exc:
            warnings.append(str(exc))
            logger.warning("skipped an object: %s", exc)
    return result
