"""Nodes you can free: each pool's pods packed now and at the recommendations
(services/refresh/node_pools.py), on a hand-built inventory and on the simulated
cluster."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from recommender.cluster.nodes import DAEMONSET, NodeInventory, NodeRecord, PodRequests
from recommender.cluster.simulated_nodes import SIM_POOLS
from recommender.models import Cluster, NodePool
from recommender.models.provisioning import HOURS_PER_MONTH
from recommender.services.refresh.cycle import refresh_cluster
from recommender.services.refresh.node_pools import plan_pools

GIB = 2**30
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def node(name: str, pool: str) -> NodeRecord:
    return NodeRecord(name, pool, cpu_millicores=4000, memory_bytes=16 * GIB, pods=10)


def pod(name: str, on: str, cpu: int, *, daemon: str = "") -> PodRequests:
    return PodRequests(
        namespace="shop",
        name=name,
        node=on,
        containers={"app": (cpu, GIB)},
        owner_kind=DAEMONSET if daemon else "ReplicaSet",
        owner_name=daemon or "web",
    )


def test_a_pool_needs_fewer_nodes_at_the_recommendations():
    # Four nodes of 4 cores; a 500m DaemonSet leaves 3.5 cores a node.
    nodes = {n: node(n, "m5.xlarge") for n in ("a", "b", "c", "d")}
    daemons = [pod(f"ds-{n}", n, 500, daemon="agent") for n in nodes]
    # Six pods of 2 cores need six nodes (one a node); at 1 core, two nodes (3 each).
    web = [pod(f"web-{i}", "abcd"[i % 4], 2000) for i in range(6)]
    other = [node("g", "gpu")]
    inventory = NodeInventory(nodes={**nodes, "g": other[0]}, pods=tuple(daemons + web))
    after = {("shop", p.name): {"app": (1000, None)} for p in web}

    gpu, m5 = plan_pools(inventory, after)

    assert (m5.name, m5.nodes, m5.pods) == ("m5.xlarge", 4, 6)
    assert (m5.nodes_needed_now, m5.nodes_needed_after) == (6, 2)
    assert (gpu.nodes, gpu.pods, gpu.nodes_needed_now) == (1, 0, 0)


def test_a_daemonsets_recommendation_changes_every_nodes_overhead():
    nodes = {n: node(n, "pool") for n in ("a", "b")}
    daemons = [pod(f"ds-{n}", n, 2000, daemon="agent") for n in nodes]
    web = [pod(f"web-{i}", "a", 1000) for i in range(4)]
    inventory = NodeInventory(nodes=nodes, pods=tuple(daemons + web))
    # Now 2 cores are left a node: four 1-core pods need two nodes. At a 100m
    # DaemonSet 3.9 cores are left: four 900m pods fit on one.
    after = {("shop", p.name): {"app": (100, None)} for p in daemons}
    after |= {("shop", p.name): {"app": (900, None)} for p in web}

    (plan,) = plan_pools(inventory, after)

    assert (plan.nodes_needed_now, plan.nodes_needed_after) == (2, 1)


def test_a_pod_no_node_can_hold_is_counted_apart():
    nodes = {"a": node("a", "pool")}
    inventory = NodeInventory(nodes=nodes, pods=(pod("huge", "a", 6000),))
    (plan,) = plan_pools(inventory, {})
    assert (plan.nodes_needed_now, plan.unplaceable_now) == (0, 1)


@pytest.mark.django_db
def test_the_simulated_cluster_stores_a_plan_for_each_pool(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 40
    settings.SIMULATION_HISTORY_DAYS = 1.0
    cluster = Cluster.objects.create(name="sim-a", kind=Cluster.Kind.SIMULATED)

    refresh_cluster(cluster_id=cluster.pk, now=NOW)

    pools = list(NodePool.objects.filter(cluster=cluster).order_by("name"))
    assert [p.name for p in pools] == sorted(name for name, *_ in SIM_POOLS)
    for p in pools:
        assert p.nodes >= 1 and p.pods >= 1
        # The layout leaves a quarter of headroom: what the pods need now fits.
        assert 1 <= p.nodes_needed_now <= p.nodes
        assert p.price_source == "default"
        instance = next(x for x in SIM_POOLS if x[0] == p.name)
        assert p.node_monthly_cost == pytest.approx(
            HOURS_PER_MONTH
            * (
                instance[1] / 1000 * settings.PRICE_PER_CORE_HOUR
                + instance[2] / GIB * settings.PRICE_PER_GIB_HOUR
            )
        )
    # The demo's recommendations are below its requests: some node is freed.
    assert sum(p.nodes_freed for p in pools) > 0
    # A second refresh replaces the plan, the same for the same fleet.
    before = [(p.name, p.nodes, p.nodes_needed_now) for p in pools]
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    again = NodePool.objects.filter(cluster=cluster).order_by("name")
    assert [(p.name, p.nodes, p.nodes_needed_now) for p in again] == before


def test_a_simulated_pool_never_has_more_nodes_than_pods():
    """A fleet whose DaemonSets alone fill a node (600 workloads: more daemon pods per
    node than its pod limit) must not size its pools by the requests over a node of
    one millicore and one byte (billions of nodes)."""
    from recommender.cluster.simulated import build_fleet
    from recommender.cluster.simulated_nodes import _node_count, _pool_index

    fleet = build_fleet(1, 600)
    for index in range(len(SIM_POOLS)):
        workloads = [
            w for w in fleet.workloads if _pool_index(w.namespace, w.name) == index
        ]
        pods = sum(w.replicas for w in workloads if w.kind != DAEMONSET)
        assert 1 <= _node_count(index, workloads, fleet) <= max(1, pods)
