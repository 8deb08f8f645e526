"""A cluster's nodes and the requests of the pods on them, as kube-state-metrics
exports them (vpaweb lists no Node objects): ``kube_node_status_allocatable{node,
resource="cpu"|"memory"|"pods",unit}``, ``kube_node_labels{node,label_<name>}`` (a
label's name made a Prometheus name, only the labels KSM's
``--metric-labels-allowlist`` lets through), ``kube_pod_container_resource_requests
{namespace,pod,container,node,resource,unit}`` and ``kube_pod_owner{namespace,pod,
owner_kind,owner_name}`` (kube-state-metrics' node and pod metrics documentation).
``inventory_from_ksm`` turns those series' (labels, value) pairs into a
``NodeInventory``; a node's pool is the first of ``pool_labels`` it carries.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

KSM_METRICS = (
    "kube_node_status_allocatable",
    "kube_node_labels",
    "kube_pod_container_resource_requests",
    "kube_pod_owner",
)
# After the configured pool label: the node-pool labels of GKE, EKS and Karpenter.
FALLBACK_POOL_LABELS = (
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
)
# The pool of a node without any of the pool labels.
NO_POOL = ""
DAEMONSET = "DaemonSet"
Samples = Iterable[tuple[dict[str, str], float]]


# slots: a cluster's nodes and pods are a few hundred thousand of these in a refresh's
# node-pools step (a simulated 100,000-container fleet's: about 150,000 nodes and
# 600,000 pods), without an attribute dict each.
@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One node: its pool, allocatable and labels (KSM's ``label_*`` names)."""

    name: str
    pool: str
    cpu_millicores: int
    memory_bytes: int
    pods: int
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PodRequests:
    """One scheduled pod's containers' requests (millicores, bytes) by name."""

    namespace: str
    name: str
    node: str
    containers: dict[str, tuple[int, int]]
    owner_kind: str = ""
    owner_name: str = ""

    @property
    def is_daemon(self) -> bool:
        return self.owner_kind == DAEMONSET


@dataclass(frozen=True)
class NodeInventory:
    nodes: dict[str, NodeRecord]
    pods: tuple[PodRequests, ...]


def prometheus_label(key: str) -> str:
    """KSM's name for a Kubernetes label key: node.kubernetes.io/instance-type ->
    label_node_kubernetes_io_instance_type."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", key)


def pool_of(labels: dict[str, str], pool_labels: Sequence[str]) -> str:
    """The value of the first of ``pool_labels`` (Kubernetes keys) on a node."""
    for key in pool_labels:
        value = labels.get(prometheus_label(key)) or labels.get(key)
        if value:
            return value
    return NO_POOL


def _amount(resource: str, value: float) -> int:
    """KSM's cpu is in cores, memory in bytes, pods a count."""
    return round(value * 1000) if resource == "cpu" else round(value)


def inventory_from_ksm(
    samples: Samples, *, pool_labels: Sequence[str]
) -> NodeInventory:
    """The nodes with cpu, memory and pods allocatable, and the pods scheduled on
    them, from the ``KSM_METRICS`` samples (``__name__`` among the labels)."""
    allocatable: dict[str, dict[str, int]] = defaultdict(dict)
    node_labels: dict[str, dict[str, str]] = {}
    requests: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(dict)
    pod_node: dict[tuple[str, str], str] = {}
    owners: dict[tuple[str, str], tuple[str, str]] = {}
    for labels, value in samples:
        name = labels.get("__name__", "")
        resource = labels.get("resource", "")
        if name == "kube_node_status_allocatable" and labels.get("node"):
            if resource in ("cpu", "memory", "pods"):
                allocatable[labels["node"]][resource] = _amount(resource, value)
        elif name == "kube_node_labels" and labels.get("node"):
            node_labels[labels["node"]] = {
                k: v for k, v in labels.items() if k.startswith("label_")
            }
        elif name == "kube_pod_container_resource_requests":
            key = (labels.get("namespace", ""), labels.get("pod", ""))
            if not all(key) or resource not in ("cpu", "memory"):
                continue
            if labels.get("node"):
                pod_node[key] = labels["node"]
            amounts = requests[key].setdefault(labels.get("container", ""), [0, 0])
            amounts[0 if resource == "cpu" else 1] = _amount(resource, value)
        elif name == "kube_pod_owner":
            key = (labels.get("namespace", ""), labels.get("pod", ""))
            if labels.get("owner_kind") and all(key):
                owners[key] = (labels["owner_kind"], labels.get("owner_name", ""))
    nodes = {
        node: NodeRecord(
            name=node,
            pool=pool_of(node_labels.get(node, {}), pool_labels),
            cpu_millicores=amounts["cpu"],
            memory_bytes=amounts["memory"],
            pods=amounts["pods"],
            labels=node_labels.get(node, {}),
        )
        for node, amounts in sorted(allocatable.items())
        if {"cpu", "memory", "pods"} <= set(amounts)
    }
    pods = tuple(
        PodRequests(
            namespace=key[0],
            name=key[1],
            node=pod_node[key],
            containers={c: (a[0], a[1]) for c, a in sorted(containers.items())},
            owner_kind=owners.get(key, ("", ""))[0],
            owner_name=owners.get(key, ("", ""))[1],
        )
        for key, containers in sorted(requests.items())
        if pod_node.get(key) in nodes
    )
    return NodeInventory(nodes=nodes, pods=pods)
