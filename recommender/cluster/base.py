"""What a cluster adapter returns and what it can do: the interface shared by the simulated
cluster and the real Kubernetes adapter, so services cannot tell them apart.

All times are timezone-aware UTC datetimes. Amounts are engine ``Resources`` (millicores, bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from recommender.engine.resources import Resources


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
    # The container's memory request when killed (upstream passes it to RecordOOM); for a
    # memory eviction, the container's usage at eviction. 0 when unknown.
    memory_request_bytes: int
    is_eviction: bool = False


@dataclass(frozen=True)
class PodInfo:
    """A live pod of a workload; containers carry current requests (status over spec)."""

    namespace: str
    name: str
    phase: str
    containers: tuple[ContainerSpec, ...]
    start_time: datetime | None = None
    labels: dict[str, str] = field(default_factory=dict)
    uid: str = ""


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


class ClusterAdapter(Protocol):
    """Reads (and, in later work, writes) one cluster."""

    def discover(self) -> ClusterSnapshot:
        """List workloads, pods, OOM kills and policy objects."""
        ...
