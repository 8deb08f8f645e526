"""Output that cannot be turned against its reader: CSV formulas, YAML comment lines,
shell commands; and names users type are validated (namespaces, factors)."""

from __future__ import annotations

import csv
import io
import shlex
from typing import Any

import pytest
import yaml
from django.test import Client

from recommender.models import ProvisioningFacts
from recommender.services.dashboard.workload_insight import (
    ContainerInsight,
    ready_to_use,
)
from recommender.text import comment_text, csv_cell
from tests.factories import make_cluster, make_recommendation, make_workload

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("prefix", ["=", "+", "-", "@", "\t", "\r"])
def test_csv_cells_starting_a_formula_are_neutralised(prefix: str) -> None:
    assert csv_cell(f"{prefix}HYPERLINK(1)") == f"'{prefix}HYPERLINK(1)"
    assert csv_cell("web") == "web"
    assert csv_cell(-5) == -5 and csv_cell(None) == ""


def test_the_csv_export_neutralises_names(read_client: Client) -> None:
    cluster = make_cluster("=cmd|' /C calc'!A0")
    workload = make_workload(cluster, "@SUM(1+1)", namespace="ns", containers={"a": {}})
    make_recommendation(
        workload.containers.get(), cpu_millicores=100, memory_bytes=2**27
    )
    response = read_client.get("/api/v1/recommendations/export?format=csv")
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(response.getvalue().decode())))
    assert rows[0]["cluster"] == "'=cmd|' /C calc'!A0"
    assert rows[0]["workload"] == "'@SUM(1+1)"


def test_comment_lines_cannot_grow_new_lines() -> None:
    assert comment_text("# a\nkind: Secret\r\n---\u2028x") == "# a?kind: Secret??---?x"


def test_manifest_comments_with_hostile_names_stay_comments(
    read_client: Client, write_client: Client, shop: Any
) -> None:
    body = (
        'kind: Deployment\nmetadata: {name: "web\\n---\\nkind: Secret", '
        "namespace: shop}\n"
        "spec:\n  template:\n    spec:\n      containers:\n"
        '      - name: "app"\n        resources: {requests: {cpu: "1"}}\n'
    )
    response = write_client.post(
        "/api/v1/static-coefficients",
        {"namespace": "shop", "cpu_factor": 0.5, "memory_factor": None},
        content_type="application/json",
    )
    assert response.status_code == 200
    response = read_client.post(
        "/api/v1/rightsize?format=yaml", body, content_type="application/yaml"
    )
    assert response.status_code == 200, response.content
    text = response.content.decode()
    comments = [line for line in text.splitlines() if line.startswith("#")]
    assert any("Deployment/web?---?kind: Secret" in line for line in comments), text
    documents = [d for d in yaml.safe_load_all(text) if d is not None]
    assert [d["kind"] for d in documents] == ["Deployment"]


def test_the_kubectl_command_is_shell_quoted(db: Any) -> None:
    cluster = make_cluster("prod")
    workload = make_workload(cluster, "web", namespace="shop", containers={"a": {}})
    workload.name = "web; rm -rf ~"  # not a Kubernetes name, but shown as typed
    item = ContainerInsight(
        container=workload.containers.get(),
        facts=ProvisioningFacts(
            savings=0.0,
            recent_ooms=0,
            shortfall_percent=0,
            missing_requests=False,
            no_data=False,
        ),
        recommendation=None,
        history=[],
        oom_kills=[],
        explanation={},
        no_data_reason=None,
        new_requests={"cpu": 100},
        new_limits={},
    )
    command, snippet, _ = ready_to_use(workload, [item])
    words = shlex.split(command)
    assert words[:5] == ["kubectl", "--namespace", "shop", "patch", "deployment"]
    assert words[5] == "web; rm -rf ~"
    assert words[-2] == "--patch" and words[-1].startswith('{"spec"')
    assert snippet.startswith("# container a\n")


@pytest.mark.parametrize(
    ("namespace", "ok"),
    [
        ("shop", True),
        ("", True),
        ("team-a1", True),
        ("Bad Namespace!", False),
        ("shop\n", False),
        ("a\x00b", False),
        ("-shop", False),
        ("x" * 64, False),
    ],
)
def test_static_coefficient_namespaces_are_dns_1123_labels(
    write_client: Client, namespace: str, ok: bool
) -> None:
    response = write_client.post(
        "/api/v1/static-coefficients",
        {"namespace": namespace, "cpu_factor": 0.5, "memory_factor": None},
        content_type="application/json",
    )
    if ok:
        assert response.status_code == 200, response.content
    else:
        assert response.status_code == 400, response.content
        assert "namespace" in response.json()["error"]["fields"]


@pytest.mark.parametrize("factor", [5e-324, 0.0, 0.009, 1.5, -1])
def test_static_coefficient_factors_have_a_sane_range(
    write_client: Client, factor: float
) -> None:
    response = write_client.post(
        "/api/v1/static-coefficients",
        {"namespace": "shop", "cpu_factor": None, "memory_factor": factor},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert "memory_factor" in response.json()["error"]["fields"]
