"""The Kubernetes API server answering 500, then not answering within the read
timeout, under a real worker: each refresh fails in bounded time naming the API call,
stores nothing, sends no write, and the task's retry recovers once the API answers."""

from __future__ import annotations

import time

import pytest

from recommender.models import Cluster, RefreshRun
from recommender.tasks import refresh_cluster as refresh_cluster_task
from tests.cluster.test_kubernetes_refresh import NOW, stored_state
from tests.faults.conftest import poll
from tests.k8s_fake.server import FakeApiServer, load_fixtures, write_kubeconfig

pytestmark = pytest.mark.faults

FAULTS = {
    "HTTP 500": (
        "/apis/apps/v1/deployments",
        {"status": 500, "message": "etcdserver: leader changed"},
        "cannot list deployments.apps: HTTP 500",
    ),
    "timeout": (
        "/api/v1/pods",
        {"delay_s": 5.0},
        "cannot list pods: no answer within the timeout",
    ),
}


@pytest.fixture
def api_server():
    server = FakeApiServer(load_fixtures()).start()
    yield server
    server.stop()


def test_an_api_server_answering_500_or_timing_out_fails_the_run_and_loses_nothing(
    workers, api_server, tmp_path
):
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", {"fake": api_server}, current="fake"
    )
    cluster = Cluster.objects.create(
        name="fake", kind=Cluster.Kind.KUBERNETES, context="fake"
    )
    queue, _worker = workers(
        {
            "KUBECONFIG": str(kubeconfig),
            "PROMETHEUS_URL": "",  # usage from metrics-server
            "VPAWEB_K8S_RETRIES": "1",
            "VPAWEB_K8S_BACKOFF_S": "0.01",
            "VPAWEB_K8S_MAX_BACKOFF_S": "0.02",
            "VPAWEB_K8S_READ_TIMEOUT_S": "0.5",
        }
    )
    first = refresh_cluster_task.apply_async(
        args=[cluster.pk, NOW.isoformat()], queue=queue
    ).get(timeout=120)
    assert first["status"] == RefreshRun.Status.SUCCEEDED
    before = stored_state()
    seen = {}

    for name, (path, fault, message) in FAULTS.items():
        last_pk = RefreshRun.objects.latest("pk").pk
        api_server.fail(path, times=1_000_000, **fault)
        sent = time.monotonic()
        result = refresh_cluster_task.apply_async(
            args=[cluster.pk, NOW.isoformat()], queue=queue
        )
        failed = poll(
            lambda last_pk=last_pk: RefreshRun.objects.filter(
                pk__gt=last_pk, status=RefreshRun.Status.FAILED
            ).first(),
            what=f"the refresh to fail on {name}",
        )
        failed_s = time.monotonic() - sent
        # What the user sees on the runs page: the failed call, named.
        assert message in failed.error, failed.error
        assert stored_state() == before
        with api_server.lock:
            api_server.faults.clear()
        healed = time.monotonic()
        # The task's retry (5-10 s later) finds the API answering again.
        assert result.get(timeout=120)["status"] == RefreshRun.Status.SUCCEEDED
        seen[name] = (round(failed_s, 1), round(time.monotonic() - healed, 1))
        assert stored_state() == before
    assert api_server.write_verbs() == []
    print(f"API server faults (failed after s, recovered after s): {seen}")
