"""What a real cluster showed, against the fake API server:

- LimitRanger fills what a pod template leaves out, exactly as the recorded
  kube-apiserver did; vpaweb stores and shows what the live pods carry, and where each
  value came from (template, LimitRange default, pod);
- pods belong to workloads by their owner references, stored: Deployment ``api``
  never claims pod ``api-migrate-x7k2p`` of Job ``api-migrate``, even once the Job is
  gone;
- a VPA object whose target does not exist is counted, stored and shown;
- a workload without samples has no recommendation and the status "no data".
"""

from __future__ import annotations

import copy
import json
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from recommender.models import (
    ApiToken,
    Cluster,
    Container,
    RefreshRun,
    Workload,
    WorkloadPod,
)
from recommender.roles import Role
from recommender.services.access.tokens import create_token
from recommender.services.readmodels.pod_owners import load_pod_owners
from recommender.services.refresh.cycle import refresh_cluster
from tests.factories import make_user
from tests.k8s_fake.server import TOKEN, FakeApiServer, write_kubeconfig

RECORDED = json.loads(
    (
        Path(__file__).parents[1] / "k8s_fake" / "recorded" / "limitranger.json"
    ).read_text()
)
NOW = datetime(2026, 11, 20, 10, 0, 30, tzinfo=UTC)
NS = "lr"
MI = 2**20


def _get(server: FakeApiServer, path: str) -> dict[str, Any]:
    request = urllib.request.Request(
        server.url + path, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def _resources_and_annotation(pod: dict[str, Any]) -> tuple[Any, Any]:
    return (
        [c.get("resources") for c in pod["spec"]["containers"]],
        (pod["metadata"].get("annotations") or {}).get("kubernetes.io/limit-ranger"),
    )


@pytest.mark.parametrize("case", ["d", "b2"])
def test_the_fake_server_admits_pods_as_the_recorded_api_server_did(case: str) -> None:
    """d: no resources in a LimitRange namespace -> LimitRanger's defaults and its
    annotation; b2: limits only -> requests default to the limits, no annotation."""
    sent = RECORDED[f"{case}_sent_pod"]
    admitted = RECORDED[f"{case}_admitted_pod"]
    namespace = sent["metadata"]["namespace"]
    limit_range = copy.deepcopy(RECORDED["limit_range"])
    limit_range["metadata"]["namespace"] = "wire-lr"
    server = FakeApiServer([limit_range, sent]).start()
    try:
        stored = _get(server, f"/api/v1/namespaces/{namespace}/pods")["items"][0]
    finally:
        server.stop()
    assert _resources_and_annotation(stored) == _resources_and_annotation(admitted)


def test_a_pod_created_before_its_limit_range_keeps_its_resources() -> None:
    limit_range = copy.deepcopy(RECORDED["limit_range"])
    server = FakeApiServer([RECORDED["d_sent_pod"], limit_range]).start()
    try:
        stored = _get(server, "/api/v1/namespaces/wire-lr/pods")["items"][0]
    finally:
        server.stop()
    assert _resources_and_annotation(stored) == ([None], None)


# --- A small cluster ------------------------------------------------------------------


def _meta(name: str, uid: str, owner: tuple[str, str, str, str] | None = None):
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "uid": uid,
        "creationTimestamp": "2026-11-19T08:00:00Z",
        "labels": {"app": name},
    }
    if owner is not None:
        api_version, kind, owner_name, owner_uid = owner
        meta["ownerReferences"] = [
            {
                "apiVersion": api_version,
                "kind": kind,
                "name": owner_name,
                "uid": owner_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return meta


# api's template: app sets nothing, proxy only a CPU request.
API_CONTAINERS = [
    {"name": "app", "image": "registry.example/api:1"},
    {
        "name": "proxy",
        "image": "registry.example/proxy:1",
        "resources": {"requests": {"cpu": "50m"}},
    },
]
MIGRATE_CONTAINERS = [
    {
        "name": "migrate",
        "image": "registry.example/api:1",
        "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}},
    }
]


def _pod(name: str, uid: str, owner: tuple[str, str, str, str], containers):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta(name, uid, owner),
        "spec": {"containers": copy.deepcopy(containers), "nodeName": "node-1"},
        "status": {"phase": "Running", "startTime": "2026-11-19T08:00:05Z"},
    }


def _objects() -> list[dict[str, Any]]:
    limit_range = copy.deepcopy(RECORDED["limit_range"])
    limit_range["metadata"]["namespace"] = NS
    template = {"metadata": {"labels": {"app": "api"}}, "spec": {}}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta("api", "uid-deploy"),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "api"}},
            "template": {**template, "spec": {"containers": API_CONTAINERS}},
        },
    }
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": _meta(
            "api-5d8f7c9b4", "uid-rs", ("apps/v1", "Deployment", "api", "uid-deploy")
        ),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "api"}},
            "template": {**template, "spec": {"containers": API_CONTAINERS}},
        },
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta("api-migrate", "uid-job"),
        "spec": {
            "selector": {"matchLabels": {"app": "api-migrate"}},
            "template": {
                "metadata": {"labels": {"app": "api-migrate"}},
                "spec": {"containers": MIGRATE_CONTAINERS, "restartPolicy": "Never"},
            },
        },
    }
    ghost_vpa = {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": _meta("ghost-vpa", "uid-vpa"),
        "spec": {
            "targetRef": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": "ghost",
            },
            "updatePolicy": {"updateMode": "Off"},
        },
    }
    return [
        # The LimitRange first: pods created after it are admitted against it.
        limit_range,
        deployment,
        replica_set,
        job,
        ghost_vpa,
        _pod(
            "api-5d8f7c9b4-x7k2q",
            "uid-pod-api",
            ("apps/v1", "ReplicaSet", "api-5d8f7c9b4", "uid-rs"),
            API_CONTAINERS,
        ),
        _pod(
            "api-migrate-x7k2p",
            "uid-pod-migrate",
            ("batch/v1", "Job", "api-migrate", "uid-job"),
            MIGRATE_CONTAINERS,
        ),
    ]


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    server = FakeApiServer(_objects()).start()
    yield server
    server.stop()


@pytest.fixture
def cluster(db, server, tmp_path, monkeypatch, settings) -> Cluster:
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", {"fake": server}, current="fake"
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    settings.PROMETHEUS_URL = ""  # usage from metrics-server: no PodMetrics here
    settings.KUBERNETES_RETRIES = 1
    settings.KUBERNETES_READ_TIMEOUT_S = 2
    return Cluster.objects.create(
        name="fake", kind=Cluster.Kind.KUBERNETES, context="fake"
    )


def _container(workload: str, name: str) -> Container:
    return Container.objects.select_related("latest_recommendation").get(
        workload__name=workload, name=name
    )


def test_requests_the_cluster_applied_are_stored_with_their_source(
    cluster: Cluster,
) -> None:
    run = refresh_cluster(cluster_id=cluster.pk, now=NOW)
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error

    app = _container("api", "app")
    # The template sets nothing; the pod carries LimitRanger's defaults.
    assert (app.requests.to_dict(), app.limits.to_dict()) == (
        {"cpu": 100, "memory": 128 * MI},
        {"cpu": 400, "memory": 256 * MI},
    )
    assert app.resource_sources == {
        "requests.cpu": "limitrange",
        "requests.memory": "limitrange",
        "limits.cpu": "limitrange",
        "limits.memory": "limitrange",
    }
    assert app.template_resources == {"requests": {}, "limits": {}}
    proxy = _container("api", "proxy")
    assert proxy.requests.to_dict() == {"cpu": 50, "memory": 128 * MI}
    assert proxy.resource_sources == {
        "requests.cpu": "template",
        "requests.memory": "limitrange",
        "limits.cpu": "limitrange",
        "limits.memory": "limitrange",
    }

    # Shown on the workload page and in the API.
    viewer = Client()
    viewer.force_login(make_user("vera", Role.VIEWER))
    api = Workload.objects.get(name="api")
    page = viewer.get(f"/workloads/{api.pk}/").content.decode()
    assert 'data-testid="source-app-requests.cpu">LimitRange default<' in page
    assert 'data-testid="source-proxy-requests.cpu">pod template<' in page
    _, key = create_token(
        name="ci", scope=ApiToken.Scope.READ, created_by=None, now=timezone.now()
    )
    reader = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    body = reader.get(f"/api/v1/workloads/{api.pk}/").json()
    app_json = next(c for c in body["containers"] if c["name"] == "app")
    assert app_json["requests"] == {"cpu": "100m", "memory": "128Mi"}
    assert app_json["sources"]["requests.cpu"] == "limitrange"
    assert app_json["template"] == {"requests": {}, "limits": {}}


def test_a_value_set_on_the_pod_after_the_template_is_the_pods(
    cluster: Cluster, server: FakeApiServer
) -> None:
    """As in d-limitrange-pod.stored.json: a webhook raised the CPU request to 250m
    over LimitRanger's 100m; the annotation still names cpu."""
    server.remove("Pod", NS, "api-5d8f7c9b4-x7k2q")
    pod = _pod(
        "api-5d8f7c9b4-x7k2q",
        "uid-pod-api",
        ("apps/v1", "ReplicaSet", "api-5d8f7c9b4", "uid-rs"),
        API_CONTAINERS,
    )
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "250m"}}
    server.add(pod)
    refresh_cluster(cluster_id=cluster.pk, now=NOW)

    app = _container("api", "app")
    assert app.requests.to_dict() == {"cpu": 250, "memory": 128 * MI}
    assert app.resource_sources["requests.cpu"] == "pod"
    assert app.resource_sources["requests.memory"] == "limitrange"


def pods_of(workload: Workload, names: list[str], *, now: datetime) -> set[str]:
    """Which ``names`` belong to ``workload``, by the owners discovery stored."""
    owners = load_pod_owners(
        cluster_id=workload.cluster_id, namespace=workload.namespace, now=now
    )
    return owners.pods_of(workload.pk, workload.namespace, names)


def test_pods_belong_to_workloads_by_owner_references_not_names(
    cluster: Cluster, server: FakeApiServer
) -> None:
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    api = Workload.objects.get(kind="Deployment", name="api")
    job = Workload.objects.get(kind="Job", name="api-migrate")
    names = ["api-5d8f7c9b4-x7k2q", "api-migrate-x7k2p"]

    assert pods_of(api, names, now=NOW) == {"api-5d8f7c9b4-x7k2q"}
    assert pods_of(job, names, now=NOW) == {"api-migrate-x7k2p"}
    stored = dict(WorkloadPod.objects.values_list("name", "workload__name"))
    assert stored == {"api-5d8f7c9b4-x7k2q": "api", "api-migrate-x7k2p": "api-migrate"}

    # The Job and its pod are gone: the stored owner still answers.
    server.remove("Pod", NS, "api-migrate-x7k2p")
    server.remove("Job", NS, "api-migrate")
    later = NOW + timedelta(minutes=5)
    refresh_cluster(cluster_id=cluster.pk, now=later)
    job.refresh_from_db()
    assert not job.is_active
    assert pods_of(api, names, now=later) == {"api-5d8f7c9b4-x7k2q"}
    # A pod discovery never saw fits only its controller's exact naming rule: the
    # Job's, not the Deployment's ("migrate" is no pod-template-hash).
    assert pods_of(api, ["api-migrate-bcd2f"], now=later) == set()
    assert pods_of(job, ["api-migrate-bcd2f"], now=later) == {"api-migrate-bcd2f"}


def test_a_vpa_object_without_its_target_is_counted_stored_and_shown(
    cluster: Cluster, server: FakeApiServer
) -> None:
    run = refresh_cluster(cluster_id=cluster.pk, now=NOW)
    message = "VPA object lr/ghost-vpa targets Deployment/ghost, which does not exist"

    assert run.counts["vpa_objects_without_target"] == 1
    cluster.refresh_from_db()
    assert [e["message"] for e in cluster.vpa_objects_without_target] == [message]
    _, key = create_token(
        name="ci", scope=ApiToken.Scope.READ, created_by=None, now=timezone.now()
    )
    clusters = (
        Client(HTTP_AUTHORIZATION=f"Bearer {key}").get("/api/v1/clusters/").json()
    )
    entry = clusters["results"][0]["vpa_objects_without_target"][0]
    assert entry["message"] == message
    assert (entry["target_kind"], entry["target_name"]) == ("Deployment", "ghost")
    viewer = Client()
    viewer.force_login(make_user("vera", Role.VIEWER))
    assert f"fake: {message}" in viewer.get("/").content.decode()

    # The VPA object is deleted: the warning goes with it.
    server.remove("VerticalPodAutoscaler", NS, "ghost-vpa")
    run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))
    assert run.counts["vpa_objects_without_target"] == 0
    cluster.refresh_from_db()
    assert cluster.vpa_objects_without_target == []


def test_a_workload_without_samples_has_no_recommendation_and_no_data(
    cluster: Cluster,
) -> None:
    """No PodMetrics at all: upstream gives no recommendation; vpaweb used to give
    the pod minimums (25m / 250Mi) and call the workload under-provisioned."""
    run = refresh_cluster(cluster_id=cluster.pk, now=NOW)

    assert run.counts["containers_without_samples"] >= 3
    for name in ("app", "proxy"):
        container = _container("api", name)
        assert container.latest_recommendation is None
        assert Container.objects.filter(pk=container.pk).no_data().exists()
    api = Workload.objects.get(name="api")
    viewer = Client()
    viewer.force_login(make_user("vera", Role.VIEWER))
    page = viewer.get(f"/workloads/{api.pk}/").content.decode()
    assert "No usage samples yet" in page
    assert "under-provisioned" not in page.lower()
    assert 'data-fact="at-risk"' not in page


@pytest.mark.django_db
def test_the_live_pods_owners_are_not_kept_twice() -> None:
    """Given the pods discovery sees now, their stored rows are not kept again (a
    fleet's pods held twice for the whole pass); the answers are the same."""
    now = timezone.now()
    cluster = Cluster.objects.create(name="owners", kind=Cluster.Kind.SIMULATED)
    web, api = (
        Workload.objects.create(
            cluster=cluster, kind="Deployment", namespace="shop", name=name
        )
        for name in ("web", "api")
    )
    for workload, pod in ((web, "web-1"), (web, "web-gone"), (api, "api-1")):
        WorkloadPod.objects.create(
            cluster=cluster, workload=workload, namespace="shop", name=pod
        )

    stored = load_pod_owners(cluster_id=cluster.pk, namespace=None, now=now)
    owners = load_pod_owners(
        cluster_id=cluster.pk,
        namespace=None,
        now=now,
        live={("shop", "web-1"): web.pk, ("shop", "api-1"): web.pk},
    )

    assert owners.stored == {("shop", "web-gone"): web.pk}
    assert set(stored.stored) == {
        ("shop", "web-1"),
        ("shop", "web-gone"),
        ("shop", "api-1"),
    }
    # A live pod's owner is the one discovery sees now, as before.
    assert [owners.owner_of("shop", p) for p in ("web-1", "web-gone", "api-1")] == [
        web.pk,
        web.pk,
        web.pk,
    ]
