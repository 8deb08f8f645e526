"""`manage.py add_cluster` against the fake API server."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from recommender.models import AuditEvent, Cluster
from tests.k8s_fake.plugin import api_server, kubeconfig

__all__ = ["api_server", "kubeconfig"]  # fixtures, for pytest


@pytest.fixture
def with_kubeconfig(kubeconfig, monkeypatch, settings):
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    settings.KUBERNETES_RETRIES = 1
    settings.KUBERNETES_BACKOFF_S = 0.01
    settings.KUBERNETES_MAX_BACKOFF_S = 0.02


def add_cluster(*args: str) -> str:
    out = io.StringIO()
    call_command("add_cluster", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_add_cluster_checks_the_connection_then_stores_the_row(
    with_kubeconfig, api_server
):
    output = add_cluster("--name", "prod-eu-1", "--context", "fake")

    assert output.strip() == (
        "Added cluster 'prod-eu-1' (Kubernetes v1.36.2, context 'fake'). "
        "Its workloads start in Off mode: recommendations only. "
        "Actuation is not allowed: vpaweb writes nothing to it."
    )
    cluster = Cluster.objects.get()
    assert (cluster.name, cluster.kind, cluster.context) == (
        "prod-eu-1",
        "kubernetes",
        "fake",
    )
    assert cluster.actuation_allowed is False
    assert api_server.gets("/version")
    assert api_server.gets("/api/v1/pods")
    assert api_server.write_verbs() == []


@pytest.mark.django_db
def test_add_cluster_allows_actuation_only_with_the_flag(with_kubeconfig, api_server):
    output = add_cluster("--name", "prod", "--context", "fake", "--allow-actuation")

    assert "Actuation is allowed: vpaweb writes where a policy says so." in output
    assert Cluster.objects.get().actuation_allowed is True
    assert AuditEvent.objects.get().action == "cluster.actuation"
    assert api_server.write_verbs() == []  # allowing writes nothing by itself


@pytest.mark.django_db
def test_a_cluster_that_cannot_be_read_is_not_stored(with_kubeconfig, api_server):
    api_server.fail("/api/v1/pods", 403, message="pods is forbidden")

    with pytest.raises(CommandError) as caught:
        add_cluster("--name", "prod", "--context", "fake")

    assert str(caught.value) == (
        "cluster 'prod': cannot list pods: HTTP 403 Forbidden: pods is forbidden"
    )
    assert not Cluster.objects.exists()


@pytest.mark.django_db
def test_an_unknown_context_is_refused(with_kubeconfig):
    with pytest.raises(CommandError, match="cannot load context 'staging'"):
        add_cluster("--name", "staging", "--context", "staging")

    assert not Cluster.objects.exists()


@pytest.mark.django_db
def test_a_duplicate_name_is_refused_and_the_first_row_kept(with_kubeconfig):
    add_cluster("--name", "prod", "--context", "fake")

    with pytest.raises(CommandError, match="a cluster named 'prod' exists already"):
        add_cluster("--name", "prod", "--context", "fake")

    assert Cluster.objects.get().context == "fake"


@pytest.mark.django_db
def test_in_cluster_outside_a_pod_is_refused(with_kubeconfig):
    with pytest.raises(CommandError, match="in-cluster config needs a pod"):
        add_cluster("--name", "here", "--in-cluster")

    assert not Cluster.objects.exists()


@pytest.mark.django_db
def test_a_name_must_be_a_slug(with_kubeconfig):
    with pytest.raises(CommandError, match="must be a slug"):
        add_cluster("--name", "Prod EU", "--context", "fake")


def test_context_and_in_cluster_exclude_each_other():
    with pytest.raises(CommandError, match="not allowed with argument"):
        add_cluster("--name", "x", "--context", "fake", "--in-cluster")


@pytest.mark.django_db
def test_add_cluster_with_a_namespace_opt_in(with_kubeconfig, api_server):
    output = add_cluster(
        "--name",
        "prod",
        "--context",
        "fake",
        "--namespace-selector",
        " vpaweb.io/enabled=true ",
    )

    assert "namespaces labelled 'vpaweb.io/enabled=true' only" in output
    assert Cluster.objects.get().namespace_selector == "vpaweb.io/enabled=true"
    (listing,) = api_server.gets("/api/v1/namespaces")
    assert listing.query["labelSelector"] == ["vpaweb.io/enabled=true"]


@pytest.mark.django_db
def test_a_selector_that_does_not_parse_is_refused_before_any_request(
    with_kubeconfig, api_server
):
    with pytest.raises(CommandError) as caught:
        add_cluster(
            "--name", "prod", "--context", "fake", "--namespace-selector", "a b c"
        )

    assert "label selector 'a b c'" in str(caught.value)
    assert not Cluster.objects.exists()
    assert api_server.requests == []


@pytest.mark.django_db
def test_a_role_without_namespaces_cannot_opt_in(with_kubeconfig, api_server):
    api_server.fail("/api/v1/namespaces", 403, message="namespaces is forbidden")

    with pytest.raises(CommandError) as caught:
        add_cluster(
            "--name", "prod", "--context", "fake", "--namespace-selector", "team=a"
        )

    assert "cannot list namespaces: HTTP 403" in str(caught.value)
    assert not Cluster.objects.exists()
