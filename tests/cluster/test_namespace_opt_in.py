"""The namespace opt-in (as Goldilocks does): a cluster read only in the namespaces a
label selector picks, against the fake API server, and the simulated cluster."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from recommender.cluster.kubernetes import KubernetesAdapter
from recommender.cluster.label_selector import matches, parse
from recommender.cluster.simulated import SimulatedCluster, build_fleet
from recommender.cluster.simulated_labels import OPTED_IN_NAMESPACES
from recommender.errors import SourceUnavailable
from tests.k8s_fake.plugin import FAST, api_server, kubeconfig
from tests.k8s_fake.server import FakeApiServer

__all__ = ["api_server", "kubeconfig"]  # fixtures, for pytest
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def _adapter(kubeconfig, selector, namespace=None):
    return KubernetesAdapter(
        cluster_name="fake",
        context="fake",
        kubeconfig=str(kubeconfig),
        settings=FAST,
        namespace=namespace,
        namespace_selector=selector,
    )


def _listed_namespaces(server: FakeApiServer) -> set[str]:
    """The namespaces whose resources were listed (namespaced list paths)."""
    found = set()
    for request in server.requests:
        parts = [p for p in request.path.split("/") if p]
        if "namespaces" in parts and parts.index("namespaces") + 2 < len(parts):
            found.add(parts[parts.index("namespaces") + 1])
    return found


def test_only_labelled_namespaces_are_read(api_server, kubeconfig):
    adapter = _adapter(kubeconfig, "vpaweb.io/enabled=true")
    try:
        snapshot = adapter.discover()
    finally:
        adapter.close()

    assert {w.namespace for w in snapshot.workloads} == {"shop"}
    assert {w.name for w in snapshot.workloads} >= {"web", "db", "legacy-cache"}
    # The namespace list went with the selector; nothing else left "shop".
    (listing,) = api_server.gets("/api/v1/namespaces")[:1]
    assert listing.path == "/api/v1/namespaces"
    assert listing.query["labelSelector"] == ["vpaweb.io/enabled=true"]
    assert _listed_namespaces(api_server) == {"shop"}
    assert not [
        r for r in api_server.requests if r.path.startswith("/apis/apps/v1/deployments")
    ]
    assert all(k.namespace == "shop" for k in snapshot.oom_kills)
    assert api_server.write_verbs() == []


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("team in (storefront,platform)", {"shop", "monitoring"}),
        ("vpaweb.io/enabled!=true", {"batch", "monitoring"}),
        ("team,!vpaweb.io/enabled", {"batch"}),
        ("team=data", {"batch"}),
        # notin also selects namespaces without the label, as Kubernetes does.
        ("vpaweb.io/enabled notin (false)", {"shop", "batch"}),
    ],
)
def test_the_fake_server_answers_selectors_like_a_real_one(
    api_server, kubeconfig, selector, expected
):
    adapter = _adapter(kubeconfig, selector)
    try:
        found = {w.namespace for w in adapter.discover().workloads}
    finally:
        adapter.close()
    assert found == expected
    assert found == {
        name
        for name, labels in NAMESPACE_LABELS.items()
        if matches(parse(selector), labels) and name != "kube-system"
    }


NAMESPACE_LABELS = {
    "batch": {"kubernetes.io/metadata.name": "batch", "team": "data"},
    "kube-system": {"kubernetes.io/metadata.name": "kube-system"},
    "monitoring": {
        "kubernetes.io/metadata.name": "monitoring",
        "team": "platform",
        "vpaweb.io/enabled": "false",
    },
    "shop": {
        "kubernetes.io/metadata.name": "shop",
        "team": "storefront",
        "vpaweb.io/enabled": "true",
    },
}


def test_no_opted_in_namespace_reads_nothing_else(api_server, kubeconfig):
    adapter = _adapter(kubeconfig, "vpaweb.io/enabled=yes-please")
    try:
        snapshot = adapter.discover()
    finally:
        adapter.close()
    assert snapshot.workloads == ()
    assert {r.path.rstrip("/") for r in api_server.requests} == {
        "/api/v1/namespaces",
        "/version",  # the server's version: not namespaced
    }


def test_a_shard_of_an_opted_in_cluster_reads_its_namespace_only_while_labelled(
    api_server, kubeconfig
):
    labelled = _adapter(kubeconfig, "vpaweb.io/enabled=true", namespace="shop")
    unlabelled = _adapter(kubeconfig, "vpaweb.io/enabled=true", namespace="batch")
    try:
        assert {w.namespace for w in labelled.discover().workloads} == {"shop"}
        assert unlabelled.discover().workloads == ()
    finally:
        labelled.close()
        unlabelled.close()


def test_a_selector_the_server_cannot_parse_is_a_clear_error(api_server, kubeconfig):
    adapter = _adapter(kubeconfig, "team in (a")
    try:
        with pytest.raises(SourceUnavailable) as caught:
            adapter.discover()
    finally:
        adapter.close()
    assert "cannot list namespaces: HTTP 400" in caught.value.message


def test_the_simulated_cluster_honours_the_selector():
    fleet = build_fleet(20261121, 60)
    whole = SimulatedCluster(name="sim", fleet=fleet, now=NOW).discover()
    opted = SimulatedCluster(
        name="sim", fleet=fleet, now=NOW, namespace_selector="vpaweb.io/enabled=true"
    ).discover()

    assert {w.namespace for w in opted.workloads} == (
        {w.namespace for w in whole.workloads} & set(OPTED_IN_NAMESPACES)
    )
    assert len(opted.workloads) < len(whole.workloads)
    assert {k.namespace for k in opted.oom_kills} <= set(OPTED_IN_NAMESPACES)
