"""What a cluster adapter returns: the read-only interface shared by the simulated
cluster and the real Kubernetes adapter, so services cannot tell them apart.

Adapters only read: there is no write method here (no patch, evict or delete); every
write goes through ``writer.ClusterWriter``. A test checks that every request a
refresh sends to a fake API server is a GET.

All times are timezone-aware UTC datetimes. Amounts are engine ``Resources``
(millicores, bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from recommender.cluster.nodes import NodeListing
from recommender.cluster.scheduling import NodePlacement
from recommender.engine.resources import Resources

# A workload's identity within a cluster, in the order the dashboard sorts by.
WorkloadKey = tuple[str, str, str]  # (namespace, kind, name)


@dataclass(frozen=True)
class ContainerSpec:
    """A container of a pod template (or of a running pod)."""

    name: str
    kind: str = "regular"  # "regular" | "init" | "sidecar" (Container.Kind values)
    requests: Resources = Resources()
    limits: Resources = Resources()


@dataclass(frozen=True)
class OomKill:
    """A container OOM-killed (or evicted for memory) in a pod."""

    namespace: str
    pod: str
    container: str
    occurred_at: datetime
    # The container's memory request when killed (upstream passes it to RecordOOM); for
    # a memory eviction, the container's usage at eviction. 0 when unknown.
    memory_request_bytes: int
    is_eviction: bool = False
    # The container's restart count when seen (0 for evictions and when unknown).
    restart_count: int = 0
    # The pod's top controller when the adapter could resolve it ("" if pod is gone).
    workload_kind: str = ""
    workload_name: str = ""


@dataclass(frozen=True)
class PodCondition:
    """A pod condition the updater follows (``PodResizePending``, …)."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition: datetime | None = None
    # The pod generation the kubelet wrote it for (1.35+: k8s-wire kubelet/01-07);
    # None from an older kubelet.
    observed_generation: int | None = None


@dataclass(frozen=True)
class Termination:
    """A container's last termination (upstream's quick-OOM test reads it)."""

    container: str
    reason: str
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class ContainerState:
    """A container's state from ``status.containerStatuses[]``: what the updater
    reads to resize only running containers and to verify a resize on evidence."""

    name: str
    state: str = ""  # "running" | "waiting" | "terminated" | "" (not reported)
    reason: str = ""  # e.g. CrashLoopBackOff for a waiting container
    ready: bool = False
    restart_count: int = 0
    container_id: str = ""

    @property
    def running(self) -> bool:
        """Running and ready."""
        return self.state == "running" and self.ready

    def describe(self) -> str:
        """ "waiting (CrashLoopBackOff)", "running, not ready", …"""
        if self.state == "running":
            return "running" if self.ready else "running, not ready"
        text = self.state or "not reported"
        return f"{text} ({self.reason})" if self.reason else text


@dataclass(frozen=True, slots=True)
class PodInfo:
    """A workload's live pod; containers carry current requests (status over spec)."""

    namespace: str
    name: str
    phase: str
    containers: tuple[ContainerSpec, ...]
    start_time: datetime | None = None
    labels: dict[str, str] = field(default_factory=dict)
    uid: str = ""
    # The pod's direct controller, e.g. a ReplicaSet (upstream's updater groups by it).
    owner_kind: str = ""
    owner_name: str = ""
    node_name: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    # A deletionTimestamp is set: the pod is terminating (the updater leaves it).
    deleting: bool = False
    conditions: tuple[PodCondition, ...] = ()
    last_terminations: tuple[Termination, ...] = ()
    created_at: datetime | None = None
    # What the API server's LimitRanger filled in at admission, from the pod's
    # kubernetes.io/limit-ranger annotation: (container, "request" | "limit",
    # resource) triples (``kube_objects.limit_ranger_fields``), and the text itself.
    limit_ranger_set: frozenset[tuple[str, str, str]] = frozenset()
    limit_ranger: str = ""
    # Regular and sidecar containers' states; () when the adapter reports none.
    container_states: tuple[ContainerState, ...] = ()
    # The containers as the pod's spec asks for them: an in-place resize the API
    # server took shows here before the kubelet actuates it (``containers`` follow
    # the status); () when the adapter reports no separate spec.
    spec_containers: tuple[ContainerSpec, ...] = ()
    # metadata.generation (a resize bumps it) and status.observedGeneration (the
    # generation the kubelet has acted on; None from an older kubelet).
    generation: int | None = None
    observed_generation: int | None = None
    # metadata.resourceVersion: the API server changes it with any change of the pod;
    # "" when the adapter reports none.
    resource_version: str = ""

    def state_of(self, container: str) -> ContainerState | None:
        """The named container's state, None when not reported."""
        return next((s for s in self.container_states if s.name == container), None)


@dataclass(frozen=True)
class WorkloadInfo:
    """A top-level controller with its pod template containers and its live pods."""

    kind: str  # Workload.Kind values
    namespace: str
    name: str
    containers: tuple[ContainerSpec, ...]
    uid: str = ""
    selector: dict[str, Any] = field(default_factory=dict)
    replicas: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    pods: tuple[PodInfo, ...] = ()
    # Resources ("cpu", "memory") that an HPA targeting this workload scales on: a
    # conflict when the workload's policy controls one of them.
    hpa_scaled_resources: tuple[str, ...] = ()
    # A CronJob's spec.schedule (cron syntax); "" for other kinds.
    schedule: str = ""
    # A DaemonSet's hard placement rules (the nodes it runs on); None: not known.
    placement: NodePlacement | None = None
    # metadata.annotations (vpaweb.io/* ones are a policy source).
    annotations: dict[str, str] = field(default_factory=dict)
    # A change marker: a text that changes whenever anything above may have changed,
    # the pods' containers and resources included (the API server's resourceVersions
    # of the controller and its pods); "" when the adapter cannot tell. Discovery
    # compares a workload whose marker moved, or that has none (discovery.py).
    version: str = ""


@dataclass(frozen=True)
class VpaObject:
    """An existing autoscaling.k8s.io/v1 VerticalPodAutoscaler, imported as a policy."""

    namespace: str
    name: str
    target_kind: str
    target_name: str
    update_mode: str
    container_policies: list[dict[str, Any]] = field(default_factory=list)
    min_replicas: int | None = None
    uid: str = ""
    # spec.recommenders names; empty means upstream's "default" recommender handles it.
    recommenders: tuple[str, ...] = ()
    # The object's status as read (conditions, recommendation): vpaweb writes it only
    # for objects whose recommenders name vpaweb, and only when it would change.
    status: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterSnapshot:
    """Everything one discovery pass found."""

    workloads: tuple[WorkloadInfo, ...]
    oom_kills: tuple[OomKill, ...] = ()
    vpas: tuple[VpaObject, ...] = ()
    # Raw-ish extras used for capping and conflicts; shapes documented by the adapter.
    limit_ranges: tuple[dict[str, Any], ...] = ()
    pod_disruption_budgets: tuple[dict[str, Any], ...] = ()
    horizontal_pod_autoscalers: tuple[dict[str, Any], ...] = ()
    # Objects the adapter skipped, each with the reason (e.g. an unparsable quantity).
    warnings: tuple[str, ...] = ()
    # The labels of the namespaces the adapter listed, {namespace: {key: value}}
    # (policy rules' namespace selectors); empty when it listed none.
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    # The API server's ``gitVersion`` (``GET /version``, e.g. ``v1.36.2``); "" unknown.
    server_version: str = ""


class ClusterAdapter(Protocol):
    """Reads one cluster (read-only: no method writes to it)."""

    def discover(self) -> ClusterSnapshot:
        """List workloads, pods, OOM kills and policy objects."""
        ...

    def list_nodes(self, snapshot: ClusterSnapshot) -> NodeListing:
        """The cluster's nodes (allocatable, labels, taints, cordon) and the pods of
        ``snapshot`` on them, or why they cannot be listed (``NodeListing.nodes``
        None: e.g. the read role grants no ``list nodes``)."""
        ...
