"""A 403 on ``pods/resize`` is read by its cause, against the fake API server answering
with the recorded shapes: a resize larger than the pod's node (k8s-wire kubelet/06: a
``NodeCapacity`` cause, no ``X-Content-Type-Options``) is that pod's infeasible resize,
and the next workload's feasible resize is still sent as a resize; an RBAC refusal
(rbac/403-16: ``nosniff``, no cause) stops the resize path for the cluster."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from recommender.cluster.kube_writer import _result
from recommender.cluster.writer import ContainerResize
from recommender.engine.resources import Resources
from recommender.models import AuditEvent, Container, Policy, ResizeChange
from recommender.services.actuation import permissions
from tests.factories import make_cluster, make_recommendation, make_workload
from tests.k8s_fake.actuation import FakeCluster, deployment, fake_cluster
from tests.k8s_fake.nodes import recorded_nodes
from tests.services.test_updater_fake_api import NOW, cycle

pytestmark = pytest.mark.django_db
MI = 2**20
WIRE = Path(__file__).resolve().parents[1] / "fixtures" / "k8s-wire"
NODE_CAPACITY = WIRE / "kubelet" / "06-resize-beyond-node-allocatable-403.json"
RBAC_RESIZE = WIRE / "rbac" / "403-16-patch-pods-resize.json"
S = ResizeChange.Status


def _recorded(path: Path) -> dict:
    data: dict = json.loads(path.read_text())["response"]
    return data


@pytest.fixture
def cleanup() -> Iterator[list[FakeCluster]]:
    fakes: list[FakeCluster] = []
    yield fakes
    for fake in fakes:
        fake.close()


def small_node() -> dict:
    """The recorded node-1 with kubelet/06's allocatable CPU (2000m)."""
    node = next(n for n in recorded_nodes() if n["metadata"]["name"] == "node-1")
    node["status"]["allocatable"]["cpu"] = "2"
    return node


def world(tmp_path: Path) -> tuple[FakeCluster, object]:
    """Two InPlaceOrRecreate workloads with automatic approval on a 2-CPU node: api's
    recommendation (3 CPU) is more than the node, web's (250m) fits."""
    fake = fake_cluster(
        deployment("api") + deployment("web") + [small_node()], tmp_path
    )
    cluster = make_cluster("fake", kind="kubernetes", context="fake")
    for name, cpu in (("api", 3000), ("web", 250)):
        workload = make_workload(
            cluster,
            name,
            namespace="shop",
            mode="InPlaceOrRecreate",
            replicas=3,
            containers={"app": {"request_cpu_millicores": 500}},
        )
        Policy.objects.filter(workload=workload).update(approval="automatic")
        make_recommendation(
            Container.objects.get(workload=workload),
            cpu_millicores=cpu,
            memory_bytes=512 * MI,
        )
    return fake, cluster


def test_the_recorded_refusals_are_told_apart():
    capacity = _recorded(NODE_CAPACITY)
    result = _result(
        capacity["status"], json.dumps(capacity["body"]), capacity["headers"]
    )
    assert result.node_capacity and not result.permission_refused
    rbac = _recorded(RBAC_RESIZE)
    result = _result(rbac["status"], json.dumps(rbac["body"]), rbac["headers"])
    assert result.permission_refused and not result.node_capacity


def test_the_fake_answers_a_resize_beyond_the_node_as_recorded(tmp_path, cleanup):
    fake, _ = world(tmp_path)
    cleanup.append(fake)
    recorded = _recorded(NODE_CAPACITY)
    result = fake.writer.resize_pod(
        namespace="shop",
        name="api-6b9c8d7f5-p0",
        containers=(ContainerResize("app", requests=Resources(cpu_millicores=500000)),),
    )
    assert result.status == recorded["status"] == 403
    assert result.content_type_options == ""  # no nosniff, as recorded
    assert "X-Content-Type-Options" not in recorded["headers"]
    body, want = dict(result.body), recorded["body"]
    assert set(body) == set(want)
    assert body["details"]["causes"] == want["details"]["causes"]
    assert body["message"] == (
        'pods "api-6b9c8d7f5-p0" is forbidden: node didn\'t have enough allocatable '
        "resources: cpu, requested: 500000, allocatable: 2000"
    )


def test_a_node_capacity_403_is_that_pods_infeasible_resize_not_a_lost_permission(
    tmp_path, cleanup
):
    fake, cluster = world(tmp_path)
    cleanup.append(fake)
    for minute in range(3):
        cycle(fake, cluster, NOW + timedelta(minutes=minute))
    cluster.refresh_from_db()
    # The resize path is not stopped: no back-off, shown allowed.
    assert cluster.write_backoff == {}
    paths = {p.path: p for p in permissions.write_paths(cluster)}
    assert paths["resize"].allowed and paths["resize"].stopped_until is None
    # web's feasible resizes are sent as resizes; none of its pods is evicted.
    web_writes = [(m, p) for m, p in fake.writes() if "/pods/web-" in p]
    assert web_writes and all(p.endswith("/resize") for _, p in web_writes)
    assert not [e for e in fake.server.evicted if e[1].startswith("web-")]
    # api's resize met the node's capacity: that pod's change falls back, as an
    # infeasible resize does, and says why.
    api = ResizeChange.objects.filter(workload__name="api", method="eviction")
    assert api.exists()
    assert all("node didn't have enough allocatable" in c.error for c in api)
    assert AuditEvent.objects.filter(
        message__contains="the resize is infeasible: the pod's node cannot hold it"
    ).exists()


def test_an_rbac_403_on_resize_stops_the_path_as_before(tmp_path, cleanup):
    fake, cluster = world(tmp_path)
    cleanup.append(fake)
    fake.server.remove("Node", None, "node-1")  # every resize fits
    cycle(fake, cluster, NOW)  # permissions asked: allowed
    fake.server.deny("", "pods/resize", "patch")
    refused = fake.writer.resize_pod(
        namespace="shop",
        name="web-6b9c8d7f5-p2",
        containers=(ContainerResize("app", requests=Resources(cpu_millicores=270)),),
    )
    recorded = _recorded(RBAC_RESIZE)
    assert refused.status == recorded["status"] == 403
    assert refused.content_type_options == recorded["headers"]["X-Content-Type-Options"]
    assert "causes" not in refused.body["details"]
    ResizeChange.objects.all().delete()
    cycle(fake, cluster, NOW + timedelta(minutes=1))
    cluster.refresh_from_db()
    stopped = cluster.write_backoff.get("resize")
    assert stopped is not None and "cannot patch resource" in stopped["error"]
