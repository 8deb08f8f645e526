"""A cluster's nodes and the requests of the pods on them: ``NodeRecord`` and
``PodRequests``, whether they come from the API server's Node objects (an adapter's
``list_nodes``, ``NodeListing``) or from kube-state-metrics' series
(``inventory_from_ksm``, ``KSM_METRICS``); a node's pool is the first of
``pool_labels`` it carries.
"""
# From kube-state-metrics: ``kube_node_status_allocatable{node,resource="cpu"|"memory"|
# "pods",unit}``, ``kube_node_labels{node,label_<name>}`` (a label's name made a
# Prometheus name, only the labels KSM's ``--metric-labels-allowlist`` lets through),
# ``kube_node_spec_taint{node,key,value,effect}``, ``kube_node_spec_unschedulable
# {node}``, ``kube_pod_container_resource_requests{namespace,pod,container,node,
# resource,unit}`` and ``kube_pod_owner{namespace,pod,owner_kind,owner_name}``
# (kube-state-metrics' node and pod metrics documentation).

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from recommender.cluster.scheduling import Taint

KSM_METRICS = (
    "kube_node_status_allocatable",
    "kube_node_labels",
    "kube_node_spec_taint",
    "kube_node_spec_unschedulable",
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
# Where a cluster's nodes were read.
FROM_API_SERVER = "api-server"
FROM_KSM = "kube-state-metrics"
FROM_SIMULATION = "simulated"
Samples = Iterable[tuple[dict[str, str], float]]


# slots: a cluster's nodes and pods are a few hundred thousand of these in a refresh's
# node-pools step (a simulated 100,000-container fleet's: about 150,000 nodes and
# 600,000 pods), without an attribute dict each.
@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One node: its pool, allocatable, labels (Kubernetes keys from the API server,
    KSM's ``label_*`` names from kube-state-metrics), hard taints and cordon."""

    name: str
    pool: str
    cpu_millicores: int
    memory_bytes: int
    pods: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False

    def label(self, key: str) -> str | None:
        """The value of the label with Kubernetes key ``key`` (None: not set)."""
        value = self.labels.get(key)
        return value if value is not None else self.labels.get(prometheus_label(key))


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
    """A cluster's nodes by name, the pods scheduled on them, and where they came
    from (``FROM_*``, with a note on why when it is not the API server);
    ``unknown_pods`` says why the pods on them are not known ("" when they are)."""

    nodes: dict[str, NodeRecord]
    pods: tuple[PodRequests, ...]
    source: str = FROM_KSM
    note: str = ""
    unknown_pods: str = ""


@dataclass(frozen=True)
class NodeListing:
    """What an adapter's ``list_nodes`` found. ``nodes`` None: it could not list them
    (``problem`` says why, e.g. the read role has no ``list nodes``). ``pods``: the
    snapshot's pods on them, None when the adapter cannot see every pod on them
    (namespaces it does not read)."""

    source: str
    nodes: tuple[NodeRecord, ...] | None
    pods: tuple[PodRequests, ...] | None = None
    problem: str = ""


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
    samples: Samples,
    *,
    pool_labels: Sequence[str],
    nodes: Mapping[str, NodeRecord] | None = None,
) -> NodeInventory:
    """The nodes with cpu, memory and pods allocatable, and the pods scheduled on
    them, from the ``KSM_METRICS`` samples (``__name__`` among the labels); with
    ``nodes`` (the API server's), those nodes and KSM's pods on them."""
    allocatable: dict[str, dict[str, int]] = defaultdict(dict)
    node_labels: dict[str, dict[str, str]] = {}
    requests: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(dict)
    pod_node: dict[tuple[str, str], str] = {}
    owners: dict[tuple[str, str], tuple[str, str]] = {}
    taints: dict[str, list[Taint]] = defaultdict(list)
    cordoned: set[str] = set()
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
        elif name == "kube_node_spec_taint" and labels.get("node"):
            taints[labels["node"]].append(
                Taint(
                    key=labels.get("key", ""),
                    value=labels.get("value", ""),
                    effect=labels.get("effect", ""),
                )
            )
        elif name == "kube_node_spec_unschedulable" and labels.get("node"):
            if value >= 1:
                cordoned.add(labels["node"])
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
    if nodes is None:
        nodes = {
            node: NodeRecord(
                name=node,
                pool=pool_of(node_labels.get(node, {}), pool_labels),
                cpu_millicores=amounts["cpu"],
                memory_bytes=amounts["memory"],
                pods=amounts["pods"],
                labels=node_labels.get(node, {}),
                taints=tuple(taints.get(node, ())),
                unschedulable=node in cordoned,
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
    return NodeInventory(nodes=dict(nodes), pods=pods, source=FROM_KSM)
