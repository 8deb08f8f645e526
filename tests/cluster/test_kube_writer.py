"""The Kubernetes ClusterWriter against the fake API server, which answers as the
recordings in tests/fixtures/k8s-wire do: evictions, resizes, Events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from recommender.cluster.writer import ContainerResize
from recommender.engine.resources import Resources
from tests.k8s_fake.actuation import FakeCluster, deployment, fake_cluster, pdb, pod

WIRE = Path(__file__).resolve().parents[1] / "fixtures" / "k8s-wire"
MI = 2**20
PODS = [f"api-6b9c8d7f5-p{i}" for i in range(3)]


def recorded(name: str) -> dict:
    return json.loads((WIRE / name).read_text())


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeCluster]:
    fake = fake_cluster([*deployment("api"), pdb("api-pdb", "shop", "api")], tmp_path)
    yield fake
    fake.close()


def test_a_successful_eviction_is_201_with_a_status_body_and_marks_the_pod(cluster):
    result = cluster.writer.evict_pod(namespace="shop", name=PODS[0])
    assert result.status == 201 and result.ok
    assert result.body == recorded("eviction/05-eviction-201.json")["response"]["body"]
    request = cluster.server.write_verbs()[0]
    assert request.path == f"/api/v1/namespaces/shop/pods/{PODS[0]}/eviction"
    assert json.loads(request.body) == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": PODS[0], "namespace": "shop"},
    }
    evicted = next(
        p for p in cluster.server.objects("Pod") if p["metadata"]["name"] == PODS[0]
    )
    assert evicted["metadata"]["deletionGracePeriodSeconds"] == 30
    assert {
        "type": "DisruptionTarget",
        "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
    }.items() <= evicted["status"]["conditions"][-1].items()
    budget = cluster.server.objects("PodDisruptionBudget")[0]["status"]
    assert budget["disruptionsAllowed"] == 0 and PODS[0] in budget["disruptedPods"]


def test_a_pdb_refusal_is_429_with_the_budget_cause_and_no_retry_after(cluster):
    assert cluster.writer.evict_pod(namespace="shop", name=PODS[0]).ok
    result = cluster.writer.evict_pod(namespace="shop", name=PODS[1])
    assert result.status == 429 and result.reason == "TooManyRequests"
    assert result.retry_after_s is None
    assert result.message == (
        "Cannot evict pod as it would violate the pod's disruption budget."
    )
    assert result.body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    # An already-terminating pod is not checked against the budget (eviction/10).
    assert cluster.writer.evict_pod(namespace="shop", name=PODS[0]).status == 201


def test_an_unobserved_pdb_answers_retry_after_10(tmp_path):
    objects = [*deployment("api"), pdb("api-pdb", "shop", "api", observed=False)]
    fake = fake_cluster(objects, tmp_path)
    try:
        result = fake.writer.evict_pod(namespace="shop", name=PODS[0])
        assert result.status == 429 and result.retry_after_s == 10
        assert result.body["details"]["retryAfterSeconds"] == 10
    finally:
        fake.close()


def test_two_pdbs_give_500_without_a_reason(tmp_path):
    objects = [
        *deployment("api"),
        pdb("one", "shop", "api"),
        pdb("two", "shop", "api"),
    ]
    fake = fake_cluster(objects, tmp_path)
    try:
        result = fake.writer.evict_pod(namespace="shop", name=PODS[0])
        expected = recorded("eviction/20-eviction-two-pdbs-500.json")["response"]
        assert result.status == 500 and "reason" not in result.body
        assert result.body == expected["body"]
    finally:
        fake.close()


def test_pending_pods_are_evicted_without_a_pdb_check_and_missing_ones_are_404(
    tmp_path,
):
    resources = {"requests": {"cpu": "500m"}}
    objects = [
        *deployment("api"),
        pdb("api-pdb", "shop", "api", allowed=0),
        pod(
            "api-6b9c8d7f5-new",
            "shop",
            "api",
            "api-6b9c8d7f5",
            resources,
            phase="Pending",
        ),
    ]
    fake = fake_cluster(objects, tmp_path)
    try:
        assert (
            fake.writer.evict_pod(namespace="shop", name="api-6b9c8d7f5-new").status
            == 201
        )
        names = [p["metadata"]["name"] for p in fake.server.objects("Pod")]
        assert "api-6b9c8d7f5-new" not in names  # an unbound pod goes at once
        missing = fake.writer.evict_pod(namespace="shop", name="no-such-pod")
        assert missing.status == 404 and missing.reason == "NotFound"
        assert missing.message == 'pods "no-such-pod" not found'
    finally:
        fake.close()


def test_a_resize_patches_the_subresource_and_bumps_the_generation(cluster):
    result = cluster.writer.resize_pod(
        namespace="shop",
        name=PODS[0],
        containers=(
            ContainerResize(
                "app",
                requests=Resources(200, 192 * MI),
                limits=Resources(400, 384 * MI),
            ),
        ),
    )
    assert result.status == 200
    assert result.body["metadata"]["generation"] == 2
    request = cluster.server.write_verbs()[0]
    assert request.method == "PATCH"
    assert request.path == f"/api/v1/namespaces/shop/pods/{PODS[0]}/resize"
    assert request.content_type == "application/strategic-merge-patch+json"
    assert json.loads(request.body) == {
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "resources": {
                        "requests": {"cpu": "200m", "memory": "192Mi"},
                        "limits": {"cpu": "400m", "memory": "384Mi"},
                    },
                }
            ]
        }
    }
    assert result.body["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "200m",
        "memory": "192Mi",
    }


def test_a_node_without_resize_support_answers_422(tmp_path):
    resources = {"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}
    objects = [pod("rz", "shop", "rz", "rz-abc", resources, resize_capable=False)]
    fake = fake_cluster(objects, tmp_path)
    try:
        result = fake.writer.resize_pod(
            namespace="shop",
            name="rz",
            containers=(ContainerResize("app", requests=Resources(200, None)),),
        )
        assert result.status == 422 and result.reason == "Invalid"
        assert result.message == (
            'Pod "rz" is invalid: spec: Forbidden: Pod running on node without '
            "support for resize"
        )
    finally:
        fake.close()


def test_an_event_is_created_on_the_pod_like_the_recording(cluster):
    result = cluster.writer.record_event(
        namespace="shop",
        pod=PODS[0],
        pod_uid=f"uid-{PODS[0]}",
        reason="EvictedByVpaweb",
        message="Pod evicted by vpaweb",
    )
    assert result.status == 201
    sent = json.loads(cluster.server.write_verbs()[0].body)
    recorded_body = recorded("events/01-core-v1-event-create-201.json")["request"][
        "body"
    ]
    assert set(sent) == set(recorded_body)
    assert sent["involvedObject"]["kind"] == "Pod"
    assert sent["reportingComponent"] == "vpaweb-updater"
