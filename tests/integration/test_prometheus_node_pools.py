"""Nodes you can free, against a real Prometheus holding kube-state-metrics' node and
pod series.

The small fleet's history plus KSM-shaped series for the last hour: two 2-core nodes
of instance type m5.large (web and db on them), one node of GKE pool ``batch-pool``
without an instance-type label (the worker), and a DaemonSet pod on each node. A
refresh packs each pool now and at the stored recommendations.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from django.conf import settings as django_settings

from recommender.engine.binpack import NodeShape
from recommender.models import Cluster, Container, NodePool, RefreshRun, Workload
from recommender.models.provisioning import HOURS_PER_MONTH
from recommender.services.refresh.cycle import refresh_cluster
from tests.engine.test_binpack import one_by_one
from tests.factories import make_user
from tests.integration.test_prometheus_oom_sources import at, refresh_against
from tests.k8s_fake.server import FakeApiServer, write_kubeconfig
from tests.prometheus_support.fixtures import END_S, LoadedPrometheus, loaded_prometheus
from tests.prometheus_support.k8s_objects import objects_for
from tests.web.conftest import client_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
__all__ = ["refresh_against"]  # fixture

GIB = 2**30
MIB = 2**20
# node: (labels, cpu cores, memory bytes, pods)
NODES = {
    "small-1": ('label_node_kubernetes_io_instance_type="m5.large"', 2, 4 * GIB, 10),
    "small-2": ('label_node_kubernetes_io_instance_type="m5.large"', 2, 4 * GIB, 10),
    "big-1": ('label_cloud_google_com_gke_nodepool="batch-pool"', 8, 32 * GIB, 110),
}
POD_NODES = {
    "web-5f6d7-aaaaa": "small-1",
    "web-5f6d7-bbbbb": "small-2",
    "db-0": "small-1",
    "worker-6c8b9-yyyyy": "big-1",
}
# The DaemonSet's pod on every node: 250m and 256Mi.
AGENT = (0.25, 256 * MIB)


def ksm_series(loaded_specs, *, end_s: int) -> str:
    """kube-state-metrics' series for the last hour, labelled as KSM labels them."""
    times = range(end_s - 3600, end_s + 1, 60)
    families: dict[str, list[tuple[str, str]]] = {
        "kube_node_status_allocatable": [],
        "kube_node_labels": [],
        "kube_pod_container_resource_requests": [],
        "kube_pod_owner": [],
    }
    for node, (label, cores, memory, pods) in NODES.items():
        for resource, unit, value in (
            ("cpu", "core", repr(float(cores))),
            ("memory", "byte", str(memory)),
            ("pods", "integer", str(pods)),
        ):
            families["kube_node_status_allocatable"].append(
                (f'node="{node}",resource="{resource}",unit="{unit}"', value)
            )
        families["kube_node_labels"].append((f'node="{node}",{label}', "1"))
        pod = f"agent-{node}"
        for resource, unit, value in (
            ("cpu", "core", repr(AGENT[0])),
            ("memory", "byte", str(AGENT[1])),
        ):
            families["kube_pod_container_resource_requests"].append(
                (
                    f'container="agent",namespace="monitoring",node="{node}",'
                    f'pod="{pod}",resource="{resource}",uid="u-{pod}",unit="{unit}"',
                    value,
                )
            )
        families["kube_pod_owner"].append(
            (
                f'namespace="monitoring",owner_is_controller="true",'
                f'owner_kind="DaemonSet",owner_name="agent",pod="{pod}",uid="u-{pod}"',
                "1",
            )
        )
    for spec in loaded_specs:
        node = POD_NODES.get(spec.pod)
        if node is None:
            continue  # gone before the end
        for resource, unit, value in (
            ("cpu", "core", repr(spec.cpu_request_cores)),
            ("memory", "byte", str(spec.memory_request_bytes)),
        ):
            families["kube_pod_container_resource_requests"].append(
                (
                    f'container="{spec.container}",namespace="{spec.namespace}",'
                    f'node="{node}",pod="{spec.pod}",resource="{resource}",'
                    f'uid="u-{spec.pod}",unit="{unit}"',
                    value,
                )
            )
    lines = []
    for family, series in families.items():
        lines.append(f"# TYPE {family} gauge\n")
        for labels, value in series:
            lines.extend(f"{family}{{{labels}}} {value} {t}\n" for t in times)
    return "".join(lines)


@pytest.fixture(scope="module")
def prometheus_with_nodes(tmp_path_factory):
    from tests.prometheus_support.openmetrics import small_fleet

    extra = ksm_series(small_fleet(end_s=END_S), end_s=END_S)
    yield from loaded_prometheus(tmp_path_factory, ("cpu", "memory"), extra)


def on_nodes(loaded: LoadedPrometheus) -> list[dict]:
    objects = objects_for(loaded.specs, live_at_s=loaded.end_s)
    for obj in objects:
        if obj["kind"] == "Pod":
            obj.setdefault("spec", {})["nodeName"] = POD_NODES[obj["metadata"]["name"]]
    return objects


def pod_totals(targets: bool) -> dict[str, tuple[int, int]]:
    """Each fleet pod's requests summed (or its containers' targets, where set)."""
    totals: dict[str, tuple[int, int]] = {}
    from tests.prometheus_support.openmetrics import small_fleet

    by_container = {
        (c.workload.name, c.name): c
        for c in Container.objects.select_related("workload", "latest_recommendation")
    }
    for spec in small_fleet(end_s=END_S):
        if spec.pod not in POD_NODES:
            continue
        cpu, memory = round(spec.cpu_request_cores * 1000), spec.memory_request_bytes
        rec = by_container[(spec.workload, spec.container)].latest_recommendation
        if targets and rec is not None:
            cpu = rec.target_cpu_millicores or cpu
            memory = rec.target_memory_bytes or memory
        was = totals.get(spec.pod, (0, 0))
        totals[spec.pod] = (was[0] + cpu, was[1] + memory)
    return totals


def test_each_pool_is_packed_now_and_at_the_recommendations(
    prometheus_with_nodes, refresh_against, admin_user
):
    loaded = prometheus_with_nodes
    cluster = refresh_against(loaded.url, on_nodes(loaded))
    run = refresh_cluster(cluster_id=cluster.pk, now=at(loaded.end_s))
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error

    pools = {p.name: p for p in NodePool.objects.filter(cluster=cluster)}
    assert set(pools) == {"m5.large", "batch-pool"}
    small, batch = pools["m5.large"], pools["batch-pool"]
    assert (small.nodes, small.pods, small.node_cpu_millicores) == (2, 3, 2000)
    assert (batch.nodes, batch.pods) == (1, 1)
    # Now: 1.75 cores a node after the agent; db 1.0 + web-a 0.6 on one, web-b
    # 0.5 on a second.
    assert small.nodes_needed_now == 2
    assert batch.nodes_needed_now == 1
    # After: the pods at their stored targets, first fit pod by pod.
    shape = NodeShape(2000 - 250, 4 * GIB - 256 * MIB, 10 - 1)
    after = pod_totals(targets=True)
    on_small = [after[p] for p, n in POD_NODES.items() if n.startswith("small")]
    fits = [(c, m) for c, m in on_small if c <= 1750 and m <= shape.memory_bytes]
    cpu = np.array([c for c, _ in fits], dtype=np.int64)
    memory = np.array([m for _, m in fits], dtype=np.int64)
    assert small.nodes_needed_after == one_by_one(cpu, memory, shape)
    # db's target (its usage is above its 1-core request) fits no 2-core node.
    assert after["db-0"][0] > 1750
    assert small.unplaceable_after == len(on_small) - len(fits) == 1
    assert after != pod_totals(targets=False)  # the targets moved something
    # No cost series, no table: the list prices of the node's allocatable.
    assert small.price_source == "default"
    assert small.node_monthly_cost == pytest.approx(
        HOURS_PER_MONTH
        * (
            2 * django_settings.PRICE_PER_CORE_HOUR
            + 4 * django_settings.PRICE_PER_GIB_HOUR
        )
    )

    # The API's rollups and the overview show them.
    client = client_for(admin_user)
    body = client.get("/api/v1/rollups?by=cluster").json()
    listed = {p["name"]: p for p in body["node_pools"]}
    assert listed["m5.large"]["nodes_needed_now"] == 2
    assert listed["m5.large"]["nodes_freed"] == small.nodes_freed
    assert listed["m5.large"]["monthly_cost_freed"] == pytest.approx(
        small.nodes_freed * small.node_monthly_cost
    )
    page = client.get("/").content.decode()
    assert 'data-testid="node-pools"' in page and "batch-pool" in page


def test_a_price_table_row_matches_the_nodes_labels(
    prometheus_with_nodes, refresh_against, tmp_path, settings
):
    loaded = prometheus_with_nodes
    core, gib = settings.PRICE_PER_CORE_HOUR, settings.PRICE_PER_GIB_HOUR
    table = tmp_path / "prices.csv"
    table.write_text(
        "match,per_core_hour,per_gib_hour\n"
        f"label:node.kubernetes.io/instance-type=m5.large,{core * 2},{gib * 2}\n"
        f'"label:cloud.google.com/gke-nodepool=batch-pool",{core * 3},{gib * 3}\n'
    )
    settings.PRICE_TABLE = str(table)
    cluster = refresh_against(loaded.url, on_nodes(loaded))
    run = refresh_cluster(cluster_id=cluster.pk, now=at(loaded.end_s))
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error

    # The workloads are priced by their nodes' labels (kube_node_labels)...
    prices = dict(Workload.objects.values_list("name", "price_per_core_hour")) | {
        "sources": set(Workload.objects.values_list("price_source", flat=True))
    }
    assert prices["web"] == pytest.approx(core * 2)
    assert prices["db"] == pytest.approx(core * 2)
    assert prices["worker"] == pytest.approx(core * 3)
    assert prices["sources"] == {"table"}
    # ... and so are the pools' nodes.
    pools = {p.name: p for p in NodePool.objects.filter(cluster=cluster)}
    assert pools["m5.large"].price_source == "table"
    assert pools["m5.large"].node_monthly_cost == pytest.approx(
        HOURS_PER_MONTH * 2 * (2 * core + 4 * gib)
    )
    assert pools["batch-pool"].node_monthly_cost == pytest.approx(
        HOURS_PER_MONTH * 3 * (8 * core + 32 * gib)
    )


# NODES' kube-state-metrics label names, as Kubernetes label keys.
KUBERNETES_KEYS = {
    "label_node_kubernetes_io_instance_type": "node.kubernetes.io/instance-type",
    "label_cloud_google_com_gke_nodepool": "cloud.google.com/gke-nodepool",
}


def api_nodes() -> list[dict]:
    """``NODES`` as the API server lists them: the recorded Node (k8s-wire nodes/11,
    wire-gp-a) with each node's name, pool label and allocatable."""
    from tests.k8s_fake.nodes import recorded_nodes

    (template,) = [n for n in recorded_nodes() if n["metadata"]["name"] == "wire-gp-a"]
    nodes = []
    for name, (label, cores, memory, pods) in NODES.items():
        node = copy.deepcopy(template)
        key, value = label.split("=")
        key = KUBERNETES_KEYS[key]
        node["metadata"]["name"] = name
        node["metadata"]["labels"] = {
            "kubernetes.io/hostname": name,
            key: value.strip('"'),
        }
        node["status"]["allocatable"] = {
            "cpu": str(cores),
            "memory": f"{memory // GIB}Gi",
            "pods": str(pods),
        }
        nodes.append(node)
    return nodes


@pytest.fixture
def refresh_with_api(tmp_path, settings, monkeypatch):
    """refresh_against's set-up, handing back the fake API server too."""
    servers: list[FakeApiServer] = []

    def start(url: str, objects: list[dict]) -> tuple[FakeApiServer, Cluster]:
        server = FakeApiServer(objects).start()
        servers.append(server)
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", {"fake": server}, current="fake"
        )
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        settings.PROMETHEUS_URL = url
        settings.PROMETHEUS_BACKFILL_DAYS = 8
        settings.CHECKPOINT_INTERVAL_S = 0
        return server, Cluster.objects.create(
            name="prod", kind=Cluster.Kind.KUBERNETES, context="fake"
        )

    yield start
    for server in servers:
        server.stop()


def client_for_admin():
    from recommender.roles import Role

    return client_for(make_user("pool-admin", Role.ADMIN))


def pools_of(cluster: Cluster) -> dict[str, tuple]:
    return {
        p.name: (p.nodes, p.pods, p.nodes_needed_now, p.nodes_needed_after)
        for p in NodePool.objects.filter(cluster=cluster)
    }


def test_nodes_come_from_the_api_server_and_from_kube_state_metrics_without_the_role(
    prometheus_with_nodes, refresh_with_api
):
    loaded = prometheus_with_nodes
    # The API server lists the nodes: they are the pools' nodes, the pods on them
    # still kube-state-metrics' (every namespace's).
    server, cluster = refresh_with_api(loaded.url, on_nodes(loaded) + api_nodes())
    run = refresh_cluster(cluster_id=cluster.pk, now=at(loaded.end_s))
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    from_api = pools_of(cluster)
    assert set(from_api) == {"m5.large", "batch-pool"}
    for pool in NodePool.objects.filter(cluster=cluster):
        assert (pool.node_source, pool.node_source_note) == ("api-server", "")
    assert server.gets("/api/v1/nodes")

    # A read role without list nodes (k8s-wire nodes/07): the same pools from
    # kube-state-metrics' series, and the 403 said.
    NodePool.objects.all().delete()
    server.allowed = {(c.group, c.plural) for c in server._collections.values()} - {
        ("", "nodes")
    }
    run = refresh_cluster(cluster_id=cluster.pk, now=at(loaded.end_s))
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    assert pools_of(cluster) == from_api
    pool = NodePool.objects.get(cluster=cluster, name="m5.large")
    assert pool.node_source == "kube-state-metrics"
    assert "HTTP 403" in pool.node_source_note
    assert 'cannot list resource "nodes"' in pool.node_source_note
    body = client_for_admin().get("/api/v1/rollups?by=cluster").json()
    listed = {p["name"]: p for p in body["node_pools"]}
    assert listed["m5.large"]["node_source"] == "kube-state-metrics"
    assert "HTTP 403" in listed["m5.large"]["node_source_note"]
    assert body["node_pools_total"]["nodes"] == 3
