"""deploy/rbac-writer.yaml grants exactly the writes the Kubernetes writer sends: each
writer method is called against the fake API server, each request is mapped to the
(API group, resource, verb) RBAC checks, and the set must equal the role's rules; and
the writer role is a subset of the proven role in tests/fixtures/k8s-wire, but for the one
rule named in NOT_PROVEN."""

from __future__ import annotations

from pathlib import Path

import yaml

from recommender.cluster.writer import ContainerResize
from recommender.engine.resources import Resources
from tests.k8s_fake.actuation import deployment, fake_cluster, vpa_object

ROOT = Path(__file__).resolve().parents[2]
WRITER = ROOT / "deploy" / "rbac-writer.yaml"
PROVEN = ROOT / "tests" / "fixtures" / "k8s-wire" / "rbac-writer-proven.yaml"
VERBS = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}


def grants(path: Path) -> set[tuple[str, str, str]]:
    documents = list(yaml.safe_load_all(path.read_text()))
    (role,) = [d for d in documents if d and d["kind"] == "ClusterRole"]
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


# Granted but not in the proven role: the VPA status patch of the drop-in path was
# recorded as an admin (k8s-wire admission/f4), not with a ServiceAccount bound to it.
NOT_PROVEN = {("autoscaling.k8s.io", "verticalpodautoscalers/status", "patch")}


def rbac_of(method: str, path: str) -> tuple[str, str, str]:
    """The (group, resource[/subresource], verb) of a namespaced request."""
    parts = [p for p in path.split("/") if p]
    if parts[0] == "api":
        assert parts[:3] == ["api", "v1", "namespaces"], path
        group, rest = "", parts[3:]
    else:
        assert parts[0] == "apis" and parts[3] == "namespaces", path
        group, rest = parts[1], parts[4:]
    # rest: namespace, resource, name[, subresource]
    resource = rest[1] if len(rest) <= 3 else f"{rest[1]}/{rest[3]}"
    return (group, resource, VERBS[method])


def test_the_writer_role_is_exactly_what_the_writer_sends(tmp_path):
    fake = fake_cluster(
        [*deployment("api"), vpa_object("api-vpa", "shop", "api")], tmp_path
    )
    pod = "api-6b9c8d7f5-p0"
    try:
        writer = fake.writer
        writer.resize_pod(
            namespace="shop",
            name=pod,
            containers=(ContainerResize("app", requests=Resources(250, None)),),
        )
        writer.annotate_pod(namespace="shop", name=pod, annotations={"a": "b"})
        writer.record_event(
            namespace="shop", pod=pod, pod_uid="u", reason="R", message="m"
        )
        writer.evict_pod(namespace="shop", name=pod)
        writer.write_vpa_status(
            namespace="shop", name="api-vpa", status={"recommendation": None}
        )
        sent = {rbac_of(m, p) for m, p in fake.writes()}
    finally:
        fake.close()
    assert sent == grants(WRITER)


def test_the_writer_role_only_writes_and_is_within_the_proven_role():
    writer = grants(WRITER)
    assert {verb for _, _, verb in writer} <= {"create", "patch"}
    assert writer - NOT_PROVEN <= grants(PROVEN)
    assert writer >= NOT_PROVEN and not NOT_PROVEN & grants(PROVEN)
