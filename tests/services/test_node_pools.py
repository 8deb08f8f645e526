"""Nodes you can free: each pool's pods packed onto its real nodes now and at the
recommendations (services/refresh/node_pools.py), on hand-built inventories, on
generated pools (a property test), on the simulated cluster and on a Kubernetes
cluster whose Nodes the fake API server lists."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recommender.cluster.nodes import (
    DAEMONSET,
    FROM_API_SERVER,
    NodeInventory,
    NodeRecord,
    PodRequests,
)
from recommender.cluster.scheduling import NodePlacement, Taint, Toleration
from recommender.cluster.simulated import build_fleet
from recommender.cluster.simulated_nodes import SIM_POOLS, simulated_inventory
from recommender.models import Cluster, NodePool
from recommender.models.provisioning import HOURS_PER_MONTH
from recommender.services.refresh.cycle import refresh_cluster
from recommender.services.refresh.node_pools import plan_pools
from tests.k8s_fake.nodes import recorded_nodes
from tests.k8s_fake.server import FakeApiServer, load_fixtures, write_kubeconfig

GIB = 2**30
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def node(name: str, pool: str, *, cpu: int = 4000, **extra: object) -> NodeRecord:
    return NodeRecord(
        name, pool, cpu_millicores=cpu, memory_bytes=16 * GIB, pods=10, **extra
    )  # type: ignore[arg-type]


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
    # Six nodes of 4 cores; a 500m DaemonSet leaves 3.5 cores a node.
    names = "abcdef"
    nodes = {n: node(n, "m5.xlarge") for n in names}
    daemons = [pod(f"ds-{n}", n, 500, daemon="agent") for n in nodes]
    # Six pods of 2 cores need six nodes (one a node); at 1 core, two nodes (3 each).
    web = [pod(f"web-{i}", names[i], 2000) for i in range(6)]
    other = node("g", "gpu")
    inventory = NodeInventory(nodes={**nodes, "g": other}, pods=tuple(daemons + web))
    after = {("shop", p.name): {"app": (1000, None)} for p in web}

    gpu, m5 = plan_pools(inventory, after)

    assert (m5.name, m5.nodes, m5.pods) == ("m5.xlarge", 6, 6)
    assert (m5.nodes_needed_now, m5.nodes_needed_after) == (6, 2)
    assert m5.nodes_freed == 4 and m5.cannot_model == ""
    assert (gpu.nodes, gpu.pods, gpu.nodes_needed_now, gpu.nodes_freed) == (1, 0, 0, 0)


def test_a_daemonsets_recommendation_changes_its_nodes_room():
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


def test_daemonsets_on_a_few_nodes_are_charged_only_there():
    """The reported case: a 96-node pool whose many small DaemonSets each run on a
    few nodes (together more than a node holds). Charged on every node, every pod was
    unplaceable now ("needed now 0") and the recommendations "needed" nodes: freed
    came out negative."""
    names = [f"n{i}" for i in range(96)]
    nodes = {n: node(n, "m5.xlarge", cpu=3920) for n in names}
    daemons = [
        pod(f"ds{d}-{k}", names[(3 * d + k) % 96], 200, daemon=f"ds{d}")
        for d in range(30)
        for k in range(3)
    ]
    web = [pod(f"web-{i}", names[i % 96], 1000) for i in range(150)]
    inventory = NodeInventory(nodes=nodes, pods=tuple(daemons + web))
    after = {("shop", p.name): {"app": (50, None)} for p in daemons}
    after |= {("shop", p.name): {"app": (600, None)} for p in web}

    (plan,) = plan_pools(inventory, after)

    assert plan.unplaceable_now == 0 and plan.cannot_model == ""
    assert 0 < plan.nodes_needed_now <= plan.nodes == 96
    assert plan.nodes_needed_after <= plan.nodes_needed_now
    freed = plan.nodes_needed_now - plan.nodes_needed_after
    assert freed == plan.nodes_freed and 0 < freed <= plan.nodes


def test_a_daemonset_runs_where_its_node_selector_and_tolerations_let_it():
    # One 2-core pod runs on a or b. A 3-core DaemonSet with a pod seen on a only.
    def plan_with(placement: NodePlacement, b: NodeRecord) -> str:
        inventory = NodeInventory(
            nodes={"a": node("a", "p", labels={"disk": "ssd"}), "b": b},
            pods=(pod("ds-a", "a", 3000, daemon="x"), pod("web", "a", 2000)),
        )
        (plan,) = plan_pools(inventory, {}, {("shop", "x"): placement})
        return plan.cannot_model

    ssd = NodePlacement(node_selector=(("disk", "ssd"),))
    plain_b = node("b", "p", labels={"disk": "hdd"})
    ssd_b = node("b", "p", labels={"disk": "ssd"})
    tainted_b = node("b", "p", taints=(Taint("dedicated", "batch", "NoSchedule"),))
    # Selected by its label: the DaemonSet takes 3 of b's 4 cores too, so the
    # running pod fits no node: the model contradicts the cluster.
    assert "fit none of its nodes" in plan_with(ssd, ssd_b)
    # Not selected: b keeps its 4 cores.
    assert plan_with(ssd, plain_b) == ""
    # A taint it does not tolerate keeps it off b; one it tolerates does not.
    assert plan_with(NodePlacement(), tainted_b) == ""
    tolerant = NodePlacement(tolerations=(Toleration("dedicated", "Exists"),))
    assert "fit none of its nodes" in plan_with(tolerant, tainted_b)
    # A condition taint (no kubelet yet) is no reason to leave a node out.
    not_ready = node(
        "b", "p", taints=(Taint("node.kubernetes.io/not-ready", "", "NoSchedule"),)
    )
    assert "fit none of its nodes" in plan_with(NodePlacement(), not_ready)


def test_a_running_pod_no_node_can_hold_means_the_pool_cannot_be_modelled():
    nodes = {"a": node("a", "pool")}
    inventory = NodeInventory(nodes=nodes, pods=(pod("huge", "a", 6000),))
    (plan,) = plan_pools(inventory, {})
    assert plan.unplaceable_now == 1 and plan.placed_now == 0
    assert "1 pods running on the pool fit none of its nodes" in plan.cannot_model
    assert plan.nodes_freed is None


def test_more_nodes_than_the_pool_has_means_it_cannot_be_modelled():
    # Three 3-core pods on two 4-core nodes (say, at requests the scheduler saw as
    # smaller): first-fit decreasing needs three nodes, the pool has two.
    nodes = {n: node(n, "pool") for n in "ab"}
    inventory = NodeInventory(
        nodes=nodes, pods=tuple(pod(f"w{i}", "a", 3000) for i in range(3))
    )
    (plan,) = plan_pools(inventory, {})
    assert plan.nodes_needed_now == 3 and plan.nodes == 2
    assert plan.cannot_model.startswith("the pods' requests need 3 nodes")


def test_cordoned_nodes_take_no_pod_and_their_pods_are_packed_elsewhere():
    nodes = {
        "a": node("a", "pool"),
        "b": node("b", "pool"),
        "c": node("c", "pool", unschedulable=True),
    }
    pods = tuple(pod(f"w{i}", "c", 1500) for i in range(4))
    (plan,) = plan_pools(NodeInventory(nodes=nodes, pods=pods), {})
    assert (plan.nodes, plan.cordoned, plan.pods) == (3, 1, 4)
    assert plan.nodes_needed_now == 2 and plan.cannot_model == ""


def test_a_recommendation_no_node_can_hold_keeps_the_pods_request():
    nodes = {n: node(n, "pool") for n in "ab"}
    pods = tuple(pod(f"w{i}", "a", 1000) for i in range(2))
    # 6 cores: larger than every node of the cluster. vpaweb never writes it.
    after = {("shop", p.name): {"app": (6000, None)} for p in pods}
    (plan,) = plan_pools(NodeInventory(nodes=nodes, pods=pods), after)
    assert plan.held_after == 2
    assert (plan.nodes_needed_now, plan.nodes_needed_after) == (1, 1)
    assert plan.unplaceable_after == 0


# --- the property: 0 <= freed <= nodes, after <= now, every pod counted -----------

ALLOCATABLE = st.sampled_from([(2000, 4), (3920, 15), (7910, 30)])


@st.composite
def pools(draw: st.DrawFn, *, shrink_only: bool) -> tuple[NodeInventory, dict]:
    """A pool of 1-12 nodes of up to three shapes, some cordoned, some tainted;
    DaemonSets running on part of them; pods on the nodes; targets for some."""
    count = draw(st.integers(1, 12))
    nodes = {}
    for i in range(count):
        cpu, gib = draw(ALLOCATABLE)
        nodes[f"n{i}"] = NodeRecord(
            f"n{i}",
            "pool",
            cpu,
            gib * GIB,
            draw(st.integers(3, 20)),
            taints=(Taint("dedicated", "x", "NoSchedule"),)
            if draw(st.booleans())
            else (),
            unschedulable=draw(st.integers(0, 9)) == 0,
        )
    names = sorted(nodes)
    pods: list[PodRequests] = []
    after: dict = {}
    for d in range(draw(st.integers(0, 4))):
        cpu = draw(st.integers(0, 800))
        on = draw(st.lists(st.sampled_from(names), unique=True, max_size=count))
        for name in on:
            pods.append(
                PodRequests(
                    "sys",
                    f"d{d}-{name}",
                    name,
                    {"c": (cpu, 64 << 20)},
                    DAEMONSET,
                    f"d{d}",
                )
            )
            factor = draw(
                st.sampled_from([0.25, 0.5, 1.0] + ([] if shrink_only else [1.5, 3.0]))
            )
            after[("sys", f"d{d}-{name}")] = {"c": (int(cpu * factor), None)}
    for i in range(draw(st.integers(0, 40))):
        cpu = draw(st.integers(0, 4000))
        memory = draw(st.integers(0, 8)) * GIB // 2
        name = f"p{i}"
        pods.append(
            PodRequests("app", name, draw(st.sampled_from(names)), {"c": (cpu, memory)})
        )
        if draw(st.booleans()):
            factor = draw(
                st.sampled_from(
                    [0.1, 0.5, 0.9, 1.0] + ([] if shrink_only else [1.2, 2.5])
                )
            )
            after[("app", name)] = {"c": (int(cpu * factor), int(memory * factor))}
    return NodeInventory(nodes=nodes, pods=tuple(pods)), after


def check(plan) -> None:
    assert plan.placed_now + plan.unplaceable_now == plan.pods
    assert plan.placed_after + plan.unplaceable_after == plan.pods
    if plan.cannot_model:
        assert plan.nodes_freed is None
        return
    assert 0 <= plan.nodes_needed_now <= plan.nodes - plan.cordoned
    assert 0 <= plan.nodes_freed <= plan.nodes
    assert plan.nodes_freed == max(0, plan.nodes_needed_now - plan.nodes_needed_after)


@settings(max_examples=100, deadline=None)
@given(pool=pools(shrink_only=True))
def test_the_node_estimate_never_frees_more_than_it_has_nor_grows_when_requests_shrink(
    pool,
):
    inventory, after = pool
    (plan,) = plan_pools(inventory, after)
    check(plan)
    if not plan.cannot_model:
        assert plan.nodes_needed_after <= plan.nodes_needed_now


@settings(max_examples=100, deadline=None)
@given(pool=pools(shrink_only=False))
def test_the_node_estimate_is_bounded_whatever_the_recommendations(pool):
    inventory, after = pool
    (plan,) = plan_pools(inventory, after)
    check(plan)


# --- the simulated cluster ---------------------------------------------------------


def test_a_large_simulated_fleet_is_modelled_not_all_unplaceable():
    """600 workloads: their DaemonSets together exceed a node, which made every pod
    of every pool unplaceable while each DaemonSet runs on four nodes."""
    from recommender.cluster.simulated import SimulatedCluster

    fleet = build_fleet(1, 600)
    snapshot = SimulatedCluster(name="sim", fleet=fleet, now=NOW).discover()
    plans = plan_pools(simulated_inventory(fleet, snapshot), {})
    assert plans
    for plan in plans:
        assert plan.cannot_model == "", plan
        assert plan.unplaceable_now == 0
        assert 1 <= plan.nodes_needed_now <= plan.nodes


@pytest.mark.django_db
def test_the_simulated_cluster_stores_a_plan_for_each_pool(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 40
    settings.SIMULATION_HISTORY_DAYS = 1.0
    cluster = Cluster.objects.create(name="sim-a", kind=Cluster.Kind.SIMULATED)

    refresh_cluster(cluster_id=cluster.pk, now=NOW)

    pools = list(NodePool.objects.filter(cluster=cluster).order_by("name"))
    # The workloads' pools: the three they are spread over, at least.
    assert {"m5.xlarge", "m5.2xlarge", "r5.xlarge"} <= {p.name for p in pools}
    assert {p.name for p in pools} <= {name for name, *_ in SIM_POOLS}
    for p in pools:
        assert p.nodes >= 1 and p.pods >= 1 and p.cannot_model == ""
        assert p.node_source == "simulated"
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


@pytest.mark.django_db
def test_pools_are_packed_again_only_when_their_inputs_change(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 40
    settings.SIMULATION_HISTORY_DAYS = 1.0
    settings.NODE_POOLS_INTERVAL_S = 300.0
    cluster = Cluster.objects.create(name="sim-a", kind=Cluster.Kind.SIMULATED)

    def plan() -> list[tuple]:
        return list(
            NodePool.objects.filter(cluster=cluster)
            .order_by("name")
            .values_list("name", "nodes_needed_after", "computed_at", "checked_at")
        )

    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    first = plan()
    assert first and all(row[2] == row[3] == NOW for row in first)
    # A minute later: within the interval, the stored plan stands, unread.
    run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))
    assert run.counts["node_pools"] == 0 and plan() == first
    # Past the interval: the inputs are read again; what the refresh changed (the
    # recommendations of a minute more of usage) is packed anew, else only the
    # check's time moves.
    later = NOW + timedelta(minutes=6)
    refresh_cluster(cluster_id=cluster.pk, now=later)
    second = plan()
    assert all(row[3] == later for row in second)
    even_later = later + timedelta(minutes=6)
    refresh_cluster(cluster_id=cluster.pk, now=even_later)
    third = plan()
    assert all(row[3] == even_later for row in third)
    # The recommendations of an unchanged fleet at an unchanged time: equal inputs,
    # the plan is not packed again.
    settings.NODE_POOLS_INTERVAL_S = 0.0
    refresh_cluster(cluster_id=cluster.pk, now=even_later)
    assert [r[:3] for r in plan()] == [r[:3] for r in third]
    # The pods changed (a workload more in the fleet): packed anew.
    settings.SIMULATION_WORKLOADS = 41
    moved = even_later + timedelta(seconds=1)
    refresh_cluster(cluster_id=cluster.pk, now=moved)
    assert plan() and all(row[2] == moved for row in plan())


# --- a Kubernetes cluster's Nodes --------------------------------------------------


@pytest.fixture
def cluster_with_nodes(db, tmp_path, monkeypatch, settings):
    """A fake API server holding the fixtures' workloads, their pods moved onto
    the recorded nodes (wire-gp-a, wire-gp-b cordoned, wire-mem-a tainted)."""
    objects = copy.deepcopy(load_fixtures())
    for obj in objects:
        if obj["kind"] == "Pod":
            obj["spec"]["nodeName"] = "wire-gp-a"
    server = FakeApiServer(objects + recorded_nodes()).start()
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", {"fake": server}, current="fake"
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    settings.PROMETHEUS_URL = ""  # usage from metrics-server: no kube-state-metrics
    settings.KUBERNETES_RETRIES = 1
    yield (
        server,
        Cluster.objects.create(
            name="fake", kind=Cluster.Kind.KUBERNETES, context="fake"
        ),
    )
    server.stop()


def test_a_kubernetes_clusters_pools_come_from_its_node_objects(cluster_with_nodes):
    server, cluster = cluster_with_nodes
    run = refresh_cluster(cluster_id=cluster.pk, now=NOW)
    assert run.status == "succeeded", run.error

    pools = {p.name: p for p in NodePool.objects.filter(cluster=cluster)}
    # Named by instance type; node-1 has no pool label.
    assert set(pools) == {"m5.xlarge", "r5.xlarge", ""}
    general = pools["m5.xlarge"]
    assert (general.nodes, general.cordoned) == (2, 1)
    assert general.node_source == FROM_API_SERVER and general.node_source_note == ""
    assert general.pods > 0 and general.cannot_model == ""
    assert general.node_allocatables == [[3920, 15242752 * 1024]]
    assert 1 <= general.nodes_needed_now <= 1  # one schedulable node
    assert server.write_verbs() == []


def test_without_list_nodes_and_kube_state_metrics_no_pools_are_stored(
    cluster_with_nodes,
):
    server, cluster = cluster_with_nodes
    server.allowed = {(c.group, c.plural) for c in server._collections.values()} - {
        ("", "nodes")
    }
    run = refresh_cluster(cluster_id=cluster.pk, now=NOW)
    assert run.status == "succeeded", run.error
    assert not NodePool.objects.filter(cluster=cluster).exists()
    assert server.gets("/api/v1/nodes")
