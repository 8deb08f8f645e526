"""The simulated cluster's nodes: a fixed set of pools (``SIM_POOLS``: instance
type, allocatable), each workload's pods on one pool and each pod on one of its
nodes, the same for every cycle of a fleet; a pool without workloads has no nodes.
"""
# A workload's pool is one of the first ``HASHED_POOLS`` by a hash of the workload
# when its pod fits there, else the first whose node holds it; a pod's node is picked
# by a hash of the pod. A fleet DaemonSet's pods (one per node it selects) go round
# the pools, from a node picked by a hash of the DaemonSet, so each runs on a few
# nodes; ``SIM_DAEMONS`` (kube-system) run on every node. A pool has a quarter more
# nodes than its workloads' pods (all replicas, at their template requests) and the
# fleet DaemonSet pods it holds need, packed beside ``SIM_DAEMONS`` (at least one).

from __future__ import annotations

import math

import numpy as np

from recommender.cluster.base import ClusterSnapshot
from recommender.cluster.nodes import (
    DAEMONSET,
    FROM_SIMULATION,
    NodeInventory,
    NodeListing,
    NodeRecord,
    PodRequests,
    prometheus_label,
)
from recommender.cluster.simulated import Fleet, SimWorkload, stable_hash
from recommender.engine.binpack import NodeShape, pack

GIB = 2**30
MIB = 2**20
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
# (instance type, cpu millicores, memory bytes, pods) allocatable per node.
SIM_POOLS = (
    ("m5.xlarge", 3_920, 14 * GIB + 512 * MIB, 58),
    ("m5.2xlarge", 7_910, 29 * GIB + 512 * MIB, 58),
    ("r5.xlarge", 3_920, 29 * GIB + 512 * MIB, 58),
    ("m5.4xlarge", 15_890, 58 * GIB, 234),
    ("m5.12xlarge", 47_810, 180 * GIB, 234),
)
# Workloads are spread over the first pools; the larger ones take the pods that fit
# none of those.
HASHED_POOLS = 3
# kube-system's DaemonSets: (name, cpu millicores, memory bytes) a node.
SIM_DAEMONS = (("kube-proxy", 100, 128 * MIB), ("node-exporter", 50, 64 * MIB))
HEADROOM = 1.25


def _fits(pool: int, cpu: int, memory: int) -> bool:
    """Whether a pod of these requests fits a node of ``pool`` beside
    ``SIM_DAEMONS``."""
    _, node_cpu, node_memory, _ = SIM_POOLS[pool]
    return cpu <= node_cpu - sum(c for _, c, _ in SIM_DAEMONS) and (
        memory <= node_memory - sum(m for _, _, m in SIM_DAEMONS)
    )


def _pool_index(namespace: str, name: str, cpu: int, memory: int) -> int:
    """The pool of a workload whose pods request (cpu, memory)."""
    hashed = stable_hash("pool", namespace, name) % HASHED_POOLS
    if _fits(hashed, cpu, memory):
        return hashed
    return next(
        (i for i in range(len(SIM_POOLS)) if _fits(i, cpu, memory)),
        len(SIM_POOLS) - 1,
    )


def pool_of_workload(sim: SimWorkload) -> int:
    """The pool a fleet workload's pods run on."""
    return _pool_index(sim.namespace, sim.name, *_requests(sim))


def _requests(sim: SimWorkload) -> tuple[int, int]:
    """A pod's template requests summed (init containers left out)."""
    each = [c.requests for c in sim.containers if c.kind != "init"]
    return (
        sum(r.cpu_millicores or 0 for r in each),
        sum(r.memory_bytes or 0 for r in each),
    )


def _daemon_pods_in(pool: int, rings: list[int], fleet: Fleet) -> list[tuple[int, int]]:
    """The requests of the fleet DaemonSets' pods that land on ``pool``'s nodes
    (pod i of a DaemonSet on the pool ``rings[i mod len(rings)]``)."""
    found: list[tuple[int, int]] = []
    if pool not in rings:
        return found
    position = rings.index(pool)
    for sim in fleet.workloads:
        if sim.kind == DAEMONSET:
            pods = len(range(position, sim.replicas, len(rings)))
            found.extend([_requests(sim)] * pods)
    return found


def _node_count(
    pool: int, workloads: list[SimWorkload], fleet: Fleet, rings: list[int]
) -> int:
    """A quarter more nodes than first-fit decreasing packs the pool's pods onto
    (its workloads' and the fleet DaemonSets' it holds), beside ``SIM_DAEMONS``."""
    _, cpu, memory, pods = SIM_POOLS[pool]
    want = _daemon_pods_in(pool, rings, fleet)
    for sim in workloads:
        if sim.kind != DAEMONSET:
            want.extend([_requests(sim)] * sim.replicas)
    packing = pack(
        np.array([c for c, _ in want], dtype=np.int64),
        np.array([m for _, m in want], dtype=np.int64),
        node=NodeShape(cpu, memory, pods),
        overhead=NodeShape(
            sum(c for _, c, _ in SIM_DAEMONS),
            sum(m for _, _, m in SIM_DAEMONS),
            len(SIM_DAEMONS),
        ),
    )
    return max(1, math.ceil(packing.nodes * HEADROOM))


def simulated_inventory(fleet: Fleet, snapshot: ClusterSnapshot) -> NodeInventory:
    """The nodes of ``fleet`` and the pods of ``snapshot`` on them."""
    by_pool: list[list[SimWorkload]] = [[] for _ in SIM_POOLS]
    pool_of: dict[tuple[str, str], int] = {}
    for sim in fleet.workloads:
        if sim.kind != DAEMONSET:
            index = pool_of[(sim.namespace, sim.name)] = pool_of_workload(sim)
            by_pool[index].append(sim)
    # The pools with workloads; the fleet's DaemonSets go round them.
    rings = [i for i, members in enumerate(by_pool) if members] or [0]
    nodes: dict[str, NodeRecord] = {}
    names: dict[int, list[str]] = {}
    for index in rings:
        instance_type, cpu, memory, pods = SIM_POOLS[index]
        names[index] = []
        # One labels dict per pool, shared by its nodes (read only).
        labels = {prometheus_label(INSTANCE_TYPE): instance_type}
        for n in range(_node_count(index, by_pool[index], fleet, rings)):
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
        is_daemon = workload.kind == DAEMONSET
        first = stable_hash("daemon", workload.namespace, workload.name)
        # Pods of one template share their requests dict (read only).
        shared: dict[int, dict[str, tuple[int, int]]] = {}
        for i, pod in enumerate(workload.pods):
            if is_daemon:
                ring = names[rings[i % len(rings)]]
                node = ring[(first + i // len(rings)) % len(ring)]
            else:
                pool = pool_of.get((workload.namespace, workload.name), rings[0])
                ring = names.get(pool) or names[rings[0]]
                node = ring[stable_hash("node", pod.name) % len(ring)]
            containers = shared.get(id(pod.containers))
            if containers is None:
                containers = shared[id(pod.containers)] = {
                    c.name: (
                        c.requests.cpu_millicores or 0,
                        c.requests.memory_bytes or 0,
                    )
                    for c in pod.containers
                    if c.kind != "init"
                }
            placed.append(
                PodRequests(
                    namespace=pod.namespace,
                    name=pod.name,
                    node=node,
                    containers=containers,
                    owner_kind=DAEMONSET if is_daemon else "",
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
    return NodeInventory(nodes=nodes, pods=tuple(placed), source=FROM_SIMULATION)


def simulated_listing(fleet: Fleet, snapshot: ClusterSnapshot) -> NodeListing:
    """The simulated cluster's ``list_nodes``: its layout's nodes and pods."""
    inventory = simulated_inventory(fleet, snapshot)
    return NodeListing(
        source=FROM_SIMULATION,
        nodes=tuple(inventory.nodes.values()),
        pods=inventory.pods,
    )
