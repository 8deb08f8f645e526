"""The shipped deploy/base/rbac.yaml is read-only and is exactly what the adapter
needs: the fake API server enforces its rules, and discovery plus metrics-server reads
succeed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from recommender.cluster.kubernetes import KubernetesAdapter
from recommender.errors import SourceUnavailable
from recommender.sources.metrics_server import MetricsServerSource
from tests.k8s_fake.nodes import recorded_nodes
from tests.k8s_fake.plugin import FAST
from tests.k8s_fake.server import FakeApiServer, load_fixtures, write_kubeconfig

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "base" / "rbac.yaml"
READ_VERBS = {"get", "list", "watch"}


def cluster_role_rules() -> list[dict]:
    documents = list(yaml.safe_load_all(RBAC.read_text()))
    (role,) = [d for d in documents if d["kind"] == "ClusterRole"]
    (binding,) = [d for d in documents if d["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "vpaweb", "namespace": "vpaweb"}
    ]
    return role["rules"]


def allowed_lists(rules: list[dict]) -> set[tuple[str, str]]:
    return {
        (group, resource)
        for rule in rules
        if "list" in rule["verbs"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }


def read_everything(server: FakeApiServer, tmp_path: Path) -> None:
    """A whole-cluster read, and a read of the opted-in namespaces only."""
    config = write_kubeconfig(tmp_path / "config", {"fake": server}, current="fake")
    adapter = KubernetesAdapter(
        cluster_name="fake", context="fake", kubeconfig=str(config), settings=FAST
    )
    opted_in = KubernetesAdapter(
        cluster_name="fake",
        context="fake",
        kubeconfig=str(config),
        settings=FAST,
        namespace_selector="vpaweb.io/enabled=true",
    )
    source = MetricsServerSource(
        cluster_name="fake", context="fake", kubeconfig=str(config), settings=FAST
    )
    try:
        adapter.check_connection()
        snapshot = adapter.discover()
        listing = adapter.list_nodes(snapshot)
        assert listing.problem == ""
        assert len(listing.nodes or ()) == len(recorded_nodes())
        opted_in.check_connection()
        assert {w.namespace for w in opted_in.discover().workloads} == {"shop"}
        source.fetch_usage(namespace=None, start_s=0.0, end_s=2e9, step_s=60.0)
    finally:
        adapter.close()
        opted_in.close()
        source.close()


def test_the_role_grants_only_read_verbs():
    rules = cluster_role_rules()

    assert rules
    assert all(set(rule["verbs"]) <= READ_VERBS for rule in rules)
    assert all("*" not in rule["resources"] + rule["apiGroups"] for rule in rules)


def test_the_shipped_role_is_enough_and_every_rule_is_used(tmp_path):
    allowed = allowed_lists(cluster_role_rules())
    server = FakeApiServer(load_fixtures() + recorded_nodes(), allowed=allowed).start()
    try:
        read_everything(server, tmp_path)
    finally:
        server.stop()

    listed = set()
    for request in server.requests:
        parts = [p for p in request.path.split("/") if p]
        if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 3:
            listed.add(("", "namespaces"))
        elif parts[0] == "api":
            listed.add(("", parts[-1]))
        elif parts[0] == "apis":
            listed.add((parts[1], parts[-1]))
    # Every rule is needed (nothing granted "just in case").
    assert listed == allowed


def test_the_shipped_role_lists_nodes():
    """A reader without ``list nodes`` gets 403 (k8s-wire nodes/07): the shipped role
    grants get, list and watch on nodes, and nothing else about them."""
    rules = [r for r in cluster_role_rules() if "nodes" in r["resources"]]
    assert rules == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}
    ]


def test_without_a_rule_the_error_names_the_forbidden_resource(tmp_path):
    allowed = allowed_lists(cluster_role_rules()) - {("policy", "poddisruptionbudgets")}
    server = FakeApiServer(load_fixtures(), allowed=allowed).start()
    try:
        with pytest.raises(SourceUnavailable) as caught:
            read_everything(server, tmp_path)
    finally:
        server.stop()

    assert caught.value.message == (
        "cluster 'fake': cannot list poddisruptionbudgets.policy: HTTP 403 Forbidden: "
        'poddisruptionbudgets.policy is forbidden: User "system:serviceaccount:vpaweb:'
        'vpaweb" cannot list resource "poddisruptionbudgets" in API group "policy" at '
        "the cluster scope"
    )
