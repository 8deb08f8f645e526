"""Nodes you can free: packing BENCH_CONTAINERS containers (default 100,000) onto a
realistic pool set whose nodes come from a NodeList, now and at the recommendations.

    python -m benchmarks nodes    (or: make bench BENCH=nodes)"""
# A generated inventory (seed BENCH_SEED, default 11): four pools (general, large,
# memory- and compute-optimized instance types), workloads of 1 to 3 containers with
# 1 to 40 replicas (most few), requests from the usual round values, each container's
# target between a quarter and 1.5 times its request. The nodes are a NodeList body
# as the API server answers it (the recorded Node of tests/fixtures/k8s-wire/nodes/11
# with each node's name, labels and allocatable), some cordoned, the memory pool
# tainted. DaemonSets: two on every node (placement: tolerate all), one on the memory
# pool only (nodeSelector and a toleration), and one seen on a tenth of the nodes
# (no placement known). Times the nodes read from the decoded NodeList
# (``kube_objects.node_of`` and the pool label, as the adapter and the refresh read
# them) plus ``plan_pools`` (both packings of every pool), wall and process cpu time
# (on a busy machine the cpu time is the fairer figure); target: <= 1 s of cpu. The
# JSON decoding of the body (the HTTP client's part) is printed apart. Then
# ``engine.binpack.pack_onto`` alone.

from __future__ import annotations

import copy
import json
import os
import time
from dataclasses import replace
from pathlib import Path


def main() -> None:
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")
    import django

    django.setup()
    import numpy as np

    from recommender.cluster import kube_objects
    from recommender.cluster.nodes import (
        DAEMONSET,
        NodeInventory,
        PodRequests,
        pool_of,
    )
    from recommender.cluster.scheduling import NodePlacement, Toleration
    from recommender.engine.binpack import NodeRoom, NodeShape, pack_onto
    from recommender.services.refresh.node_pools import plan_pools, pool_labels

    gib, mib = 2**30, 2**20
    count = int(os.environ.get("BENCH_CONTAINERS", "100000"))
    seed = int(os.environ.get("BENCH_SEED", "11"))
    rng = np.random.default_rng(seed)
    pools = (
        ("m5.xlarge", 3_920, 14 * gib, 58, 0.4),
        ("m5.4xlarge", 15_890, 57 * gib, 234, 0.3),
        ("r5.2xlarge", 7_910, 61 * gib, 58, 0.2),
        ("c5.4xlarge", 15_890, 28 * gib, 234, 0.1),
    )
    cpus = np.array([50, 100, 200, 250, 500, 750, 1000, 1500, 2000])
    mems = np.array([64, 128, 256, 512, 768, 1024, 2048, 4096, 8192]) * mib
    replica_counts = np.array([1, 2, 3, 4, 6, 10, 20, 40])
    replica_shares = np.array([0.2, 0.3, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02])
    after: dict[tuple[str, str], dict[str, tuple[int | None, int | None]]] = {}
    by_pool: dict[str, list[PodRequests]] = {p[0]: [] for p in pools}
    containers = workload = 0
    while containers < count:
        index = int(rng.choice(len(pools), p=[p[4] for p in pools]))
        pool, node_cpu, node_mem = pools[index][:3]
        n_containers = int(rng.choice([1, 2, 3], p=[0.6, 0.3, 0.1]))
        replicas = int(rng.choice(replica_counts, p=replica_shares))
        # A pod takes at most a third of a node.
        fit_cpu = cpus[cpus * n_containers <= node_cpu // 3]
        fit_mem = mems[mems * n_containers <= node_mem // 3]
        requests = {
            f"c{i}": (int(rng.choice(fit_cpu)), int(rng.choice(fit_mem)))
            for i in range(n_containers)
        }
        # Targets as the recommender rounds them: whole millicores and MiB.
        targets: dict[str, tuple[int | None, int | None]] = {
            name: (
                int(cpu * rng.uniform(0.25, 1.5)),
                int(mem * rng.uniform(0.25, 1.5)) // mib * mib,
            )
            for name, (cpu, mem) in requests.items()
        }
        for replica in range(min(replicas, (count - containers) // n_containers or 1)):
            name = f"w{workload}-{replica}"
            by_pool[pool].append(PodRequests("bench", name, pool, requests))
            after[("bench", name)] = targets
            containers += n_containers
        workload += 1

    # The NodeList: the recorded Node, renamed, relabelled and resized per node.
    recorded = Path(__file__).resolve().parents[1] / (
        "tests/fixtures/k8s-wire/nodes/11-sa-node-reader-node-list-200.json"
    )
    answer = json.loads(recorded.read_text())["response"]["body"]
    (template,) = [i for i in answer["items"] if i["metadata"]["name"] == "wire-gp-a"]
    daemons = (("proxy", 100, 128 * mib), ("logs", 200, 256 * mib))
    items = []
    names: dict[str, list[str]] = {}
    for pool, cpu, memory, max_pods, _ in pools:
        want = sum(sum(c for c, _ in p.containers.values()) for p in by_pool[pool])
        want_mem = sum(sum(m for _, m in p.containers.values()) for p in by_pool[pool])
        names[pool] = []
        for i in range(max(1, int(max(want / cpu, want_mem / memory) * 1.3))):
            node = copy.deepcopy(template)
            name = f"{pool}-{i}"
            names[pool].append(name)
            node["metadata"]["name"] = name
            node["metadata"]["labels"] = {
                **template["metadata"]["labels"],
                "kubernetes.io/hostname": name,
                "node.kubernetes.io/instance-type": pool,
            }
            node["status"]["allocatable"] = {
                "cpu": f"{cpu}m",
                "memory": f"{memory // 1024}Ki",
                "pods": str(max_pods),
            }
            node["spec"] = {}
            if pool == "r5.2xlarge":
                node["spec"]["taints"] = [
                    {"key": "workload", "value": "memory", "effect": "NoSchedule"}
                ]
            if i % 50 == 49:
                node["spec"]["unschedulable"] = True
            items.append(node)
    body = json.dumps({**answer, "items": items}).encode()
    everywhere = NodePlacement(tolerations=(Toleration(operator="Exists"),))
    placements = {
        ("kube-system", "proxy"): everywhere,
        ("kube-system", "logs"): everywhere,
        ("kube-system", "memory-agent"): NodePlacement(
            node_selector=(("node.kubernetes.io/instance-type", "r5.2xlarge"),),
            tolerations=(Toleration("workload", "Equal", "memory", "NoSchedule"),),
        ),
    }
    pods: list[PodRequests] = []
    all_names = [n for pool_names in names.values() for n in pool_names]
    # Each DaemonSet's pods as seen: the two everywhere on every other node (the
    # placement covers the rest), the memory agent on one node, the partial one on
    # a tenth of the nodes.
    for i, name in enumerate(all_names):
        for daemon, d_cpu, d_mem in daemons:
            if i % 2 == 0:
                pods.append(
                    PodRequests(
                        "kube-system",
                        f"{daemon}-{name}",
                        name,
                        {daemon: (d_cpu, d_mem)},
                        DAEMONSET,
                        daemon,
                    )
                )
        if i % 10 == 0:
            pods.append(
                PodRequests(
                    "kube-system",
                    f"gpu-probe-{name}",
                    name,
                    {"probe": (300, 512 * mib)},
                    DAEMONSET,
                    "gpu-probe",
                )
            )
    first_memory = names["r5.2xlarge"][0]
    pods.append(
        PodRequests(
            "kube-system",
            "memory-agent-0",
            first_memory,
            {"agent": (500, gib)},
            DAEMONSET,
            "memory-agent",
        )
    )
    for pool, members in by_pool.items():
        ring = names[pool]
        pods.extend(
            PodRequests(p.namespace, p.name, ring[k % len(ring)], p.containers)
            for k, p in enumerate(members)
        )
    workload_pods = sum(len(m) for m in by_pool.values())
    print(
        f"{containers} containers in {workload_pods} pods of {workload} workloads "
        f"(seed {seed}); a NodeList of {len(items)} nodes ({len(body) / 2**20:.1f} "
        f"MiB) in {len(pools)} pools, {len(pods) - workload_pods} DaemonSet pods seen"
    )

    cpu_started = time.process_time()
    decoded = json.loads(body)
    decode_s = time.process_time() - cpu_started
    started, cpu_started = time.perf_counter(), time.process_time()
    labels = pool_labels()
    listed = [kube_objects.node_of(item) for item in decoded["items"]]
    nodes = {n.name: replace(n, pool=pool_of(n.labels, labels)) for n in listed}
    parsed_s = time.process_time() - cpu_started
    plans = plan_pools(NodeInventory(nodes=nodes, pods=tuple(pods)), after, placements)
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    for plan in plans:
        print(
            f"  {plan.name}: {plan.nodes} nodes ({plan.cordoned} cordoned), "
            f"{plan.pods} pods, needed {plan.nodes_needed_now} -> "
            f"{plan.nodes_needed_after}, freed {plan.nodes_freed}"
            f" (fit no node: {plan.unplaceable_now} -> {plan.unplaceable_after})"
            + (f"; cannot model: {plan.cannot_model}" if plan.cannot_model else "")
        )
    print(
        f"nodes read from the NodeList + plan_pools (both packings, every pool): "
        f"{seconds:.3f} s wall, {cpu_seconds:.3f} s cpu, of which the nodes "
        f"{parsed_s:.3f} s (target <= 1 s cpu); the body's JSON decoding before it "
        f"{decode_s:.3f} s cpu; load average {os.getloadavg()[0]:.2f}"
    )
    engine_s = 0.0
    for pool, cpu, memory, max_pods, _ in pools:
        totals = np.array(
            [
                [
                    sum(c for c, _ in p.containers.values()),
                    sum(m for _, m in p.containers.values()),
                ]
                for p in by_pool[pool]
            ],
            dtype=np.int64,
        ).reshape(-1, 2)  # a pool without pods: no rows, still two columns
        size = len(names[pool])
        room = NodeRoom(
            np.full(size, cpu - 300, dtype=np.int64),
            np.full(size, memory - 384 * mib, dtype=np.int64),
            np.full(size, max_pods - 2, dtype=np.int64),
        )
        tick = time.perf_counter()
        pack_onto(
            totals[:, 0],
            totals[:, 1],
            room=room,
            spare=NodeShape(cpu - 300, memory - 384 * mib, max_pods - 2),
        )
        engine_s += time.perf_counter() - tick
    print(f"engine pack_onto alone (current requests, every pool): {engine_s:.3f} s")
