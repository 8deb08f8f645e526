"""A refresh cycle of a Kubernetes cluster row, through the adapter dispatch, end to end
against the fake API server: discovery and metrics-server samples are stored, and a
failing API server loses nothing stored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recommender.errors import SourceUnavailable
from recommender.models import Cluster, Container, Policy, RefreshRun, Workload
from recommender.services.refresh.cycle import refresh_cluster
from tests.k8s_fake.plugin import api_server, kubeconfig

__all__ = ["api_server", "kubeconfig"]  # fixtures, for pytest

# Just after the fixtures' PodMetrics were scraped (10:00:05 and 10:00:17).
NOW = datetime(2026, 11, 20, 10, 0, 30, tzinfo=UTC)


@pytest.fixture
def kubernetes_cluster(db, kubeconfig, monkeypatch, settings):
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    settings.PROMETHEUS_URL = ""  # usage from metrics-server
    settings.KUBERNETES_RETRIES = 1
    settings.KUBERNETES_BACKOFF_S = 0.01
    settings.KUBERNETES_MAX_BACKOFF_S = 0.02
    settings.KUBERNETES_READ_TIMEOUT_S = 0.5
    return Cluster.objects.create(
        name="fake", kind=Cluster.Kind.KUBERNETES, context="fake"
    )


def stored_state() -> list[tuple]:
    return list(
        Container.objects.order_by("pk").values_list(
            "workload__kind",
            "workload__name",
            "workload__is_active",
            "name",
            "kind",
            "request_cpu_millicores",
            "request_memory_bytes",
            "latest_recommendation_id",
        )
    )


def test_refresh_reads_the_cluster_and_a_failing_api_server_loses_nothing(
    kubernetes_cluster, api_server
):
    run = refresh_cluster(cluster_id=kubernetes_cluster.pk, now=NOW)

    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    assert Workload.objects.filter(cluster=kubernetes_cluster).count() == 8
    web = Workload.objects.get(kind="Deployment", name="web")
    assert dict(web.containers.values_list("name", "kind")) == {
        "app": "regular",
        "migrate": "init",
        "log-shipper": "sidecar",
    }
    assert run.counts.get("samples", 0) > 0
    before = stored_state()

    api_server.fail("/apis/apps/v1/deployments", 500, times=10)
    with pytest.raises(SourceUnavailable) as caught:
        refresh_cluster(cluster_id=kubernetes_cluster.pk, now=NOW)

    assert (
        "cluster 'fake': cannot list deployments.apps: HTTP 500" in caught.value.message
    )
    failed = RefreshRun.objects.filter(status=RefreshRun.Status.FAILED).get()
    assert "deployments.apps" in failed.error
    assert stored_state() == before
    assert api_server.write_verbs() == []


def test_off_mode_workloads_get_only_get_requests_through_every_kind_of_cycle(
    kubernetes_cluster, api_server, settings
):
    # Only the Off-mode VPA object stays, so every workload is (and stays) Off.
    api_server.remove("VerticalPodAutoscaler", "shop", "web-vpa")
    settings.PROMETHEUS_BACKFILL_DAYS = 8.0  # first contact reads 8 day-long chunks
    cycles = [
        (NOW, None),
        (NOW + timedelta(minutes=1), None),
        (NOW + timedelta(minutes=2), "shop"),
        (NOW + timedelta(minutes=2), "batch"),
        (NOW + timedelta(minutes=3), None),
    ]

    for now, namespace in cycles:
        run = refresh_cluster(
            cluster_id=kubernetes_cluster.pk, now=now, namespace=namespace
        )
        assert run.status == RefreshRun.Status.SUCCEEDED, run.error

    policies = Policy.objects.filter(workload__cluster=kubernetes_cluster)
    assert policies.count() == 8
    assert set(policies.values_list("mode", flat=True)) == {Policy.Mode.OFF}
    methods = [request.method for request in api_server.requests]
    assert len(methods) > 5 * 13  # every cycle listed every resource
    assert set(methods) == {"GET"}, [
        (r.method, r.path) for r in api_server.requests if r.method != "GET"
    ]
    assert api_server.gets("/apis/metrics.k8s.io/v1beta1/")
    assert api_server.gets("/verticalpodautoscalers")


def test_a_shard_lists_only_its_namespace(kubernetes_cluster, api_server):
    refresh_cluster(cluster_id=kubernetes_cluster.pk, now=NOW)
    api_server.requests.clear()

    run = refresh_cluster(
        cluster_id=kubernetes_cluster.pk,
        now=NOW + timedelta(minutes=1),
        namespace="batch",
    )

    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    # The server's version (not namespaced) aside.
    paths = sorted(
        r.path for r in api_server.requests if r.path.rstrip("/") != "/version"
    )
    # One page of each resource discovery lists, plus metrics-server's PodMetrics and
    # pods (for its init containers), all in the namespace: never the whole cluster.
    assert all("/namespaces/batch/" in path for path in paths), paths
    assert sorted(path.rsplit("/", 1)[1] for path in paths) == sorted(
        [
            "cronjobs",
            "daemonsets",
            "deployments",
            "events",
            "horizontalpodautoscalers",
            "jobs",
            "limitranges",
            "poddisruptionbudgets",
            "pods",  # discovery
            "pods",  # metrics-server's init containers
            "pods",  # metrics.k8s.io PodMetrics
            "replicasets",
            "replicationcontrollers",
            "statefulsets",
            "verticalpodautoscalers",
        ]
    )
    assert (
        run.counts["workloads"]
        == Workload.objects.filter(
            cluster=kubernetes_cluster, namespace="batch"
        ).count()
    )
