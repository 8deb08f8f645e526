"""The one writer role grants exactly what the writer interface sends, both ways.

Every method of ``ClusterWriter`` (recommender/cluster/writer.py) is called on the
Kubernetes writer against the fake API server; each request is mapped to the RBAC
attributes the API server checks (API group, resource[/subresource], verb, name) and
matched against deploy/components/actuation/rbac-writer.yaml the way RBAC matches
(``resourceNames`` never match a create). The test fails when a method sends something
no rule grants, when a rule (or one of its verbs) is used by no request, when a write
method has no caller in vpaweb, and when the role grants more than the recorded proof
(tests/fixtures/k8s-wire/rbac-writer-proven.yaml) but for the rules named in
NOT_PROVEN. Also: every deploy path uses this one file, and every ``deploy/...`` path
the docs name exists.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from recommender.cluster.kube_writer import KubernetesWriter
from recommender.cluster.writer import ContainerResize
from recommender.engine.resources import Resources
from recommender.services.admission.registration import (
    CONFIGURATION_NAME,
    webhook_configuration,
)
from tests.k8s_fake.actuation import deployment, fake_cluster, hpa, vpa_object

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "recommender"
WRITER_ROLE = ROOT / "deploy" / "components" / "actuation" / "rbac-writer.yaml"
PROVEN = ROOT / "tests" / "fixtures" / "k8s-wire" / "rbac-writer-proven.yaml"
VERBS = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}
POD = "api-6b9c8d7f5-p0"

# One call of each write method. A new method of ClusterWriter fails the test until it
# is called here (and so checked against the role).
CALLS: dict[str, Callable[[KubernetesWriter], Any]] = {
    "resize_pod": lambda w: w.resize_pod(
        namespace="shop",
        name=POD,
        containers=(ContainerResize("app", requests=Resources(250, None)),),
    ),
    "record_event": lambda w: w.record_event(
        namespace="shop", pod=POD, pod_uid="u", reason="R", message="m"
    ),
    "evict_pod": lambda w: w.evict_pod(namespace="shop", name=POD),
    "write_vpa_status": lambda w: w.write_vpa_status(
        namespace="shop", name="api-vpa", status={"recommendation": None}
    ),
    # Twice: the first creates (GET 404, POST), the second replaces (GET, PUT).
    "apply_webhook_configuration": lambda w: [
        w.apply_webhook_configuration(
            body=webhook_configuration(url="https://vpaweb.example:8443", cluster="c")
        )
        for _ in range(2)
    ],
    "delete_webhook_configuration": lambda w: w.delete_webhook_configuration(
        name=CONFIGURATION_NAME
    ),
    "patch_hpa": lambda w: w.patch_hpa(
        namespace="shop",
        name="api",
        operations=[
            {
                "op": "test",
                "path": "/spec/metrics/0/resource/target/averageUtilization",
                "value": 70,
            },
            {
                "op": "replace",
                "path": "/spec/metrics/0/resource/target/averageUtilization",
                "value": 140,
            },
        ],
    ),
}

# Granted but not in the proven role: the VPA status patch of the drop-in path was
# recorded as an admin (k8s-wire admission/f4); the proof did not delete the webhook
# configuration (`webhook uninstall` sends that DELETE); the HPA patch is proven apart.
NOT_PROVEN = {
    ("autoscaling.k8s.io", "verticalpodautoscalers/status", "patch"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "delete"),
    # Proven by a Role of only this rule, not in the writer proof (k8s-wire hpa/33-35).
    ("autoscaling", "horizontalpodautoscalers", "patch"),
}


def role_of(path: Path) -> dict[str, Any]:
    (role,) = [
        d for d in yaml.safe_load_all(path.read_text()) if d["kind"] == "ClusterRole"
    ]
    return role


def grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def attributes(method: str, path: str) -> tuple[str, str, str, str]:
    """(group, resource[/subresource], verb, name) of one request, as RBAC sees it."""
    parts = [p for p in path.split("/") if p]
    group = "" if parts[0] == "api" else parts[1]
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if rest and rest[0] == "namespaces":
        rest = rest[2:]  # namespaced: the namespace does not enter the rules here
    resource = rest[0] if len(rest) <= 2 else f"{rest[0]}/{rest[2]}"
    name = rest[1] if len(rest) >= 2 else ""
    verb = VERBS.get(method) or ("get" if name else "list")
    return (group, resource, verb, name)


def matching_rules(
    role: dict[str, Any], request: tuple[str, str, str, str]
) -> list[tuple[int, str]]:
    """The (rule index, verb) pairs of the role that allow the request."""
    group, resource, verb, name = request
    found = []
    for index, rule in enumerate(role["rules"]):
        names = rule.get("resourceNames")
        if (
            group in rule["apiGroups"]
            and resource in rule["resources"]
            and verb in rule["verbs"]
            # A rule with resourceNames matches only requests naming one of them; a
            # create never names its object (kube-apiserver's RBAC authorizer).
            and (not names or (verb != "create" and name in names))
        ):
            found.append((index, verb))
    return found


def sent_by_each_method(tmp_path: Path) -> dict[str, list[tuple[str, str, str, str]]]:
    fake = fake_cluster(
        [*deployment("api"), vpa_object("api-vpa", "shop", "api"), hpa("api")],
        tmp_path,
    )
    sent: dict[str, list[tuple[str, str, str, str]]] = {}
    try:
        for method, call in CALLS.items():
            before = len(fake.server.requests)
            call(fake.writer)
            sent[method] = [
                attributes(r.method, r.path) for r in fake.server.requests[before:]
            ]
    finally:
        fake.close()
    return sent


def writer_methods() -> set[str]:
    tree = ast.parse((SOURCE / "cluster" / "writer.py").read_text())
    protocol = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.name == "ClusterWriter"
    )
    # review_access POSTs a SelfSubjectAccessReview, which any authenticated user may
    # create (the built-in system:basic-user role): no writer rule covers it.
    return {
        item.name
        for item in protocol.body
        if isinstance(item, ast.FunctionDef)
        and item.name not in {"close", "review_access"}
    }


def test_every_writer_method_is_called_here():
    assert set(CALLS) == writer_methods()


def test_the_writer_role_grants_every_request_and_no_rule_goes_unused(tmp_path):
    role = role_of(WRITER_ROLE)
    used: set[tuple[int, str]] = set()
    ungranted = {}
    for method, requests in sent_by_each_method(tmp_path).items():
        assert requests, method
        for request in requests:
            rules = matching_rules(role, request)
            if not rules:
                ungranted.setdefault(method, []).append(request)
            used.update(rules)
    assert ungranted == {}
    every = {
        (index, verb)
        for index, rule in enumerate(role["rules"])
        for verb in rule["verbs"]
    }
    assert every - used == set()  # a rule, or a verb of one, that nothing sends


def test_the_rule_matcher_applies_resource_names_as_rbac_does():
    role = {
        "rules": [
            {"apiGroups": ["g"], "resources": ["r"], "verbs": ["create"]},
            {
                "apiGroups": ["g"],
                "resources": ["r"],
                "resourceNames": ["mine"],
                "verbs": ["get", "create"],
            },
        ]
    }
    assert matching_rules(role, ("g", "r", "create", "")) == [(0, "create")]
    assert matching_rules(role, ("g", "r", "get", "mine")) == [(1, "get")]
    assert matching_rules(role, ("g", "r", "get", "other")) == []
    assert matching_rules(role, ("g", "r/status", "get", "mine")) == []


def test_every_write_method_has_a_caller_in_vpaweb():
    called = set()
    for path in SOURCE.rglob("*.py"):
        if path.parent.name == "cluster":
            continue  # the writers themselves
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                called.add(node.func.attr)
    assert writer_methods() - called == set()


def test_the_writer_role_writes_only_and_stays_within_the_proof():
    role = role_of(WRITER_ROLE)
    writer = grants(role)
    proven = grants(role_of(PROVEN))
    assert {verb for _, _, verb in writer} <= {
        "get",
        "create",
        "patch",
        "update",
        "delete",
    }
    # get only where it is named: reading is the reader role's job.
    for rule in role["rules"]:
        if "get" in rule["verbs"]:
            assert rule["resourceNames"] == [CONFIGURATION_NAME]
    assert writer - NOT_PROVEN <= proven
    assert writer >= NOT_PROVEN and not NOT_PROVEN & proven
    assert ("", "pods", "patch") not in writer
    assert not {g for g, _, _ in writer} & {"coordination.k8s.io", "events.k8s.io"}


def test_one_writer_role_file_for_every_deploy_path():
    """No other manifest under deploy/ defines a role that writes. The Helm chart
    carries the writer role's rules as a file (a chart reads nothing outside itself):
    that copy must be those very rules (its templates are Go templates, rendered and
    compared with the overlays by tests/deploy/test_helm_chart.py)."""
    writes = {"create", "update", "patch", "delete", "deletecollection", "*"}
    writers = []
    rule_copies = []
    for path in sorted((ROOT / "deploy").rglob("*.yaml")):
        if "helm" in path.parts and "templates" in path.parts:
            continue
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, list):  # the chart's copy of a role's rules
                if any(set(r["verbs"]) & writes for r in document):
                    rule_copies.append(document)
                continue
            if not document or document.get("kind") not in ("ClusterRole", "Role"):
                continue
            if any(set(r["verbs"]) & writes for r in document["rules"]):
                writers.append(str(path.relative_to(ROOT)))
    assert writers == [str(WRITER_ROLE.relative_to(ROOT))]
    (writer_role,) = [
        d
        for d in yaml.safe_load_all(WRITER_ROLE.read_text())
        if d and d["kind"] == "ClusterRole"
    ]
    writer_rules = writer_role["rules"]
    assert rule_copies == [writer_rules]
    kustomization = yaml.safe_load(
        (WRITER_ROLE.parent / "kustomization.yaml").read_text()
    )
    assert kustomization["resources"] == [WRITER_ROLE.name]


DEPLOY_PATH = re.compile(r"(?<![/\w.-])deploy/[A-Za-z0-9_./-]*[A-Za-z0-9_]")


def test_every_deploy_path_the_docs_name_exists():
    missing = {}
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for line_number, line in enumerate(doc.read_text().splitlines(), 1):
            for found in DEPLOY_PATH.findall(line):
                if not (ROOT / found).exists():
                    missing.setdefault(doc.name, []).append((line_number, found))
    assert missing == {}
