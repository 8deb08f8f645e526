"""Nodes you can free: packing BENCH_CONTAINERS containers (default 100,000) onto
a realistic pool set, now and at the recommendations.

    python -m benchmarks nodes    (or: make bench BENCH=nodes)"""
# A generated inventory (seed BENCH_SEED, default 11): four pools (general, large,
# memory- and compute-optimized instance types), workloads of 1 to 3 containers with
# 1 to 40 replicas (most few), requests from the usual round values, each container's
# target between a quarter and 1.5 times its request, and two DaemonSets on every
# node. Times ``services.node_pools.plan_pools`` (both packings of every pool, pods
# summed in Python) and ``engine.binpack.pack`` alone, wall and process cpu time (on a
# busy machine the cpu time is the fairer figure); target: plan_pools ≤ 1 s.

from __future__ import annotations

import os
import time


def main() -> None:
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")
    import django

    django.setup()
    import numpy as np

    from recommender.cluster.nodes import (
        DAEMONSET,
        NodeInventory,
        NodeRecord,
        PodRequests,
    )
    from recommender.engine.binpack import NodeShape, pack
    from recommender.services.refresh.node_pools import plan_pools

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
    pods: list[PodRequests] = []
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
            pod = PodRequests("bench", name, pool, requests)
            by_pool[pool].append(pod)
            after[("bench", name)] = targets
            containers += n_containers
        workload += 1
    daemons = (("proxy", 100, 128 * mib), ("logs", 200, 256 * mib))
    nodes: dict[str, NodeRecord] = {}
    for pool, cpu, memory, max_pods, _ in pools:
        want = sum(sum(c for c, _ in p.containers.values()) for p in by_pool[pool])
        want_mem = sum(sum(m for _, m in p.containers.values()) for p in by_pool[pool])
        for i in range(max(1, int(max(want / cpu, want_mem / memory) * 1.2))):
            name = f"{pool}-{i}"
            nodes[name] = NodeRecord(name, pool, cpu, memory, max_pods)
            for daemon, d_cpu, d_mem in daemons:
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
    first_node = {pool: f"{pool}-0" for pool, *_ in pools}
    for pool, members in by_pool.items():
        pods.extend(
            PodRequests(p.namespace, p.name, first_node[pool], p.containers)
            for p in members
        )
    inventory = NodeInventory(nodes=nodes, pods=tuple(pods))
    workload_pods = sum(len(m) for m in by_pool.values())
    print(
        f"{containers} containers in {workload_pods} pods of {workload} workloads "
        f"(seed {seed}); {len(nodes)} nodes in {len(pools)} pools, "
        f"{len(pods) - workload_pods} DaemonSet pods"
    )
    started, cpu_started = time.perf_counter(), time.process_time()
    plans = plan_pools(inventory, after)
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    for plan in plans:
        print(
            f"  {plan.name}: {plan.nodes} nodes, {plan.pods} pods, needed "
            f"{plan.nodes_needed_now} -> {plan.nodes_needed_after}"
            f" (fit no node: {plan.unplaceable_now} -> {plan.unplaceable_after})"
        )
    print(
        f"plan_pools (both packings, every pool): {seconds:.3f} s wall, "
        f"{cpu_seconds:.3f} s cpu (target <= 1 s)"
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
        )
        tick = time.perf_counter()
        pack(
            totals[:, 0],
            totals[:, 1],
            node=NodeShape(cpu, memory, max_pods),
            overhead=NodeShape(300, 384 * mib, 2),
        )
        engine_s += time.perf_counter() - tick
    print(f"engine pack alone (current requests, every pool): {engine_s:.3f} s")
