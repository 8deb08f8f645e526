"""The Kubernetes adapter when the API server misbehaves: retries, timeouts, errors."""

from __future__ import annotations

import dataclasses

import pytest

from recommender.cluster.kubernetes import KubernetesAdapter
from recommender.errors import SourceUnavailable
from tests.k8s_fake.plugin import FAST, adapter, api_server, kubeconfig, sleeps
from tests.k8s_fake.server import write_kubeconfig

__all__ = ["adapter", "api_server", "kubeconfig", "sleeps"]  # fixtures, for pytest

DEPLOYMENTS = "/apis/apps/v1/deployments"
FORBIDDEN = (
    'deployments.apps is forbidden: User "system:serviceaccount:vpaweb:vpaweb" cannot '
    'list resource "deployments" in API group "apps" at the cluster scope'
)


def make_adapter(kubeconfig, sleeps, **settings) -> KubernetesAdapter:
    return KubernetesAdapter(
        cluster_name="fake",
        context="fake",
        kubeconfig=str(kubeconfig),
        settings=dataclasses.replace(FAST, **settings),
        sleep=sleeps.append,
    )


def test_a_500_then_success_is_retried(adapter, api_server, sleeps):
    api_server.fail(DEPLOYMENTS, 500)

    snapshot = adapter.discover()

    assert len(snapshot.workloads) == 8
    assert len(api_server.gets(DEPLOYMENTS)) == 2
    (wait,) = sleeps
    # The first backoff: half fixed, half jitter, of FAST.backoff_s.
    assert FAST.backoff_s / 2 <= wait <= FAST.backoff_s


def test_a_429_waits_as_long_as_retry_after_says(api_server, kubeconfig, sleeps):
    api_server.fail(DEPLOYMENTS, 429, retry_after="2")
    adapter = make_adapter(kubeconfig, sleeps, max_backoff_s=5.0)

    adapter.discover()
    adapter.close()

    assert sleeps == [2.0]


def test_retry_after_is_capped_by_the_longest_backoff(api_server, kubeconfig, sleeps):
    api_server.fail(DEPLOYMENTS, 503, retry_after="3600")
    adapter = make_adapter(kubeconfig, sleeps, max_backoff_s=0.5)

    adapter.discover()
    adapter.close()

    assert sleeps == [0.5]


def test_a_persistent_500_is_source_unavailable_naming_cluster_and_resource(
    adapter, api_server, sleeps
):
    api_server.fail(DEPLOYMENTS, 500, times=10, message="etcdserver: request timed out")

    with pytest.raises(SourceUnavailable) as caught:
        adapter.discover()

    message = caught.value.message
    assert message == (
        "cluster 'fake': cannot list deployments.apps: HTTP 500 Internal Server Error: "
        "etcdserver: request timed out (after 3 attempts)"
    )
    assert len(api_server.gets(DEPLOYMENTS)) == 1 + FAST.retries
    # Exponential: the second wait is drawn from a range twice as high.
    assert len(sleeps) == 2
    assert sleeps[0] <= FAST.backoff_s <= sleeps[1] <= 2 * FAST.backoff_s


def test_a_403_is_not_retried_and_says_what_is_forbidden(adapter, api_server, sleeps):
    api_server.fail(DEPLOYMENTS, 403, message=FORBIDDEN)

    with pytest.raises(SourceUnavailable) as caught:
        adapter.discover()

    assert caught.value.message == (
        f"cluster 'fake': cannot list deployments.apps: HTTP 403 Forbidden: {FORBIDDEN}"
    )
    assert len(api_server.gets(DEPLOYMENTS)) == 1
    assert sleeps == []


def test_a_wrong_token_is_a_401_not_retried(api_server, tmp_path, sleeps):
    config = write_kubeconfig(tmp_path / "config", {"fake": api_server}, current="fake")
    config.write_text(config.read_text().replace(api_server.token, "not-the-token"))
    adapter = KubernetesAdapter(
        cluster_name="fake", context="fake", kubeconfig=str(config), settings=FAST
    )

    with pytest.raises(SourceUnavailable) as caught:
        adapter.discover()

    assert "HTTP 401 Unauthorized" in caught.value.message
    assert len(api_server.requests) == 1


def test_timeouts_are_retried_then_reported(adapter, api_server, sleeps):
    api_server.fail("/api/v1/pods", delay_s=5.0, times=3)

    with pytest.raises(SourceUnavailable) as caught:
        adapter.discover()

    assert caught.value.message == (
        "cluster 'fake': cannot list pods: no answer within the timeout "
        "(connect 1 s, read 0.3 s) (after 3 attempts)"
    )
    assert len(api_server.gets("/api/v1/pods")) == 3


def test_one_timeout_then_an_answer_succeeds(adapter, api_server, sleeps):
    api_server.fail("/apis/batch/v1/jobs", delay_s=5.0)

    snapshot = adapter.discover()

    assert len(snapshot.workloads) == 8
    assert len(sleeps) == 1


def test_an_unreachable_server_is_reported(adapter, api_server, sleeps):
    api_server.stop()

    with pytest.raises(SourceUnavailable) as caught:
        adapter.discover()

    assert caught.value.message.startswith(
        "cluster 'fake': cannot list deployments.apps: cannot reach the API server"
    )
    assert caught.value.message.endswith("(after 3 attempts)")


def test_an_answer_that_is_not_json_is_reported_not_retried(
    adapter, api_server, sleeps
):
    api_server.fail(
        "/apis/policy/v1/poddisruptionbudgets", raw_body=b"<html>502 Bad Gateway</html>"
    )

    with pytest.raises(SourceUnavailable) as caught:
        adapter.discover()

    assert caught.value.message.startswith(
        "cluster 'fake': cannot list poddisruptionbudgets.policy: "
        "the answer is not valid JSON"
    )
    assert sleeps == []


def test_a_missing_builtin_api_is_an_error_but_a_missing_vpa_crd_is_not(
    adapter, api_server
):
    api_server.unserve("autoscaling.k8s.io")
    assert adapter.discover().vpas == ()

    api_server.unserve("policy")
    with pytest.raises(SourceUnavailable) as caught:
        adapter.discover()

    assert caught.value.message == (
        "cluster 'fake': poddisruptionbudgets.policy is not served by the API server "
        "(HTTP 404): is the API installed?"
    )


def test_check_connection_reports_a_forbidden_pod_list(adapter, api_server):
    api_server.fail("/api/v1/pods", 403, message="pods is forbidden")

    with pytest.raises(SourceUnavailable) as caught:
        adapter.check_connection()

    assert caught.value.message == (
        "cluster 'fake': cannot list pods: HTTP 403 Forbidden: pods is forbidden"
    )
    (probe,) = api_server.gets("/api/v1/pods")
    assert probe.query["limit"] == ["1"]
