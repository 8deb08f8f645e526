"""The simulated cluster's nodes: a fixed set of pools (``SIM_POOLS``: instance
type, allocatable) with each workload's pods on one pool (by a hash of the
workload) and each pod on one of its nodes (by a hash of the pod); a DaemonSet's
pods go round the pools. A pool has a quarter more nodes than its workloads'
template requests, all replicas, plus the DaemonSets on every node, fill (at least
one): the same for every cycle of a fleet. ``SIM_DAEMONS`` (kube-system) run on
every node besides the fleet's own DaemonSets.
"""

from __future__ import annotations

import math

from recommender.cluster.base import ClusterSnapshot
from recommender.cluster.nodes import (
    DAEMONSET,
    NodeInventory,
    NodeRecord,
    PodRequests,
    prometheus_label,
)
from recommender.cluster.simulated import Fleet, SimWorkload, stable_hash

GIB = 2**30
MIB = 2**20
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
# (instance type, cpu millicores, memory bytes, pods) allocatable per node.
SIM_POOLS = (
    ("m5.xlarge", 3_920, 14 * GIB + 512 * MIB, 58),
    ("m5.2xlarge", 7_910, 29 * GIB + 512 * MIB, 58),
    ("r5.xlarge", 3_920, 29 * GIB + 512 * MIB, 58),
)
# kube-system's DaemonSets: (name, cpu millicores, memory bytes) a node.
SIM_DAEMONS = (("kube-proxy", 100, 128 * MIB), ("node-exporter", 50, 64 * MIB))
HEADROOM = 1.25


def _pool_index(namespace: str, name: str) -> int:
    return stable_hash("pool", namespace, name) % len(SIM_POOLS)


def _node_count(pool: int, workloads: list[SimWorkload], fleet: Fleet) -> int:
    _, cpu, memory, pods = SIM_POOLS[pool]
    daemon_cpu = sum(c for _, c, _ in SIM_DAEMONS)
    daemon_memory = sum(m for _, _, m in SIM_DAEMONS)
    daemon_pods = len(SIM_DAEMONS)
    for sim in fleet.workloads:
        if sim.kind == DAEMONSET:
            each = [c.requests for c in sim.containers if c.kind != "init"]
            daemon_cpu += sum(r.cpu_millicores or 0 for r in each)
            daemon_memory += sum(r.memory_bytes or 0 for r in each)
            daemon_pods += 1
    want_cpu = want_memory = want_pods = 0.0
    for sim in workloads:
        if sim.kind == DAEMONSET:
            continue
        each = [c.requests for c in sim.containers if c.kind != "init"]
        want_cpu += sim.replicas * sum(r.cpu_millicores or 0 for r in each)
        want_memory += sim.replicas * sum(r.memory_bytes or 0 for r in each)
        want_pods += sim.replicas
    shares = (
        want_cpu / max(cpu - daemon_cpu, 1),
        want_memory / max(memory - daemon_memory, 1),
        want_pods / max(pods - daemon_pods, 1),
    )
    # A pool never needs more nodes than it has pods (daemons that fill a node's
    # allocatable must not make the count grow with the requests).
    return max(1, min(math.ceil(max(shares) * HEADROOM), math.ceil(want_pods)))


def simulated_inventory(fleet: Fleet, snapshot: ClusterSnapshot) -> NodeInventory:
    """The nodes of ``fleet`` and the pods of ``snapshot`` on them."""
    by_pool: list[list[SimWorkload]] = [[] for _ in SIM_POOLS]
    for sim in fleet.workloads:
        by_pool[_pool_index(sim.namespace, sim.name)].append(sim)
    nodes: dict[str, NodeRecord] = {}
    names: list[list[str]] = []
    for index, (instance_type, cpu, memory, pods) in enumerate(SIM_POOLS):
        names.append([])
        # One labels dict per pool, shared by its nodes (read only).
        labels = {prometheus_label(INSTANCE_TYPE): instance_type}
        for n in range(_node_count(index, by_pool[index], fleet)):
            name = f"sim-{instance_type.replace('.', '-')}-{n}"
            names[index].append(name)
            nodes[name] = NodeRecord(
                name=name,
                pool=instance_type,
                cpu_millicores=cpu,
                memory_bytes=memory,
                pods=pods,
                labels=labels,
            )
    placed: list[PodRequests] = []
    for workload in snapshot.workloads:
        pool = names[_pool_index(workload.namespace, workload.name)]
        for i, pod in enumerate(workload.pods):
            if workload.kind == DAEMONSET:
                ring = names[i % len(names)]
                node = ring[(i // len(names)) % len(ring)]
            else:
                node = pool[stable_hash("node", pod.name) % len(pool)]
            placed.append(
                PodRequests(
                    namespace=pod.namespace,
                    name=pod.name,
                    node=node,
                    containers={
                        c.name: (
                            c.requests.cpu_millicores or 0,
                            c.requests.memory_bytes or 0,
                        )
                        for c in pod.containers
                        if c.kind != "init"
                    },
                    owner_kind=workload.kind if workload.kind == DAEMONSET else "",
                    owner_name=workload.name,
                )
            )
    # One requests dict per daemon, shared by its pods (read only).
    daemons = [(daemon, {daemon: (cpu, memory)}) for daemon, cpu, memory in SIM_DAEMONS]
    for node in nodes:
        for daemon, containers in daemons:
            placed.append(
                PodRequests(
                    namespace="kube-system",
                    name=f"{daemon}-{node}",
                    node=node,
                    containers=containers,
                    owner_kind=DAEMONSET,
                    owner_name=daemon,
                )
            )
    return NodeInventory(nodes=nodes, pods=tuple(placed))
