"""Work per request is bounded: rightsize and recommendation-query cost a fixed number
of queries whatever the number of documents or containers, and a request with more
containers than VPAWEB_API_MAX_CONTAINERS is refused before any lookup."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from recommender.models import NamespaceLimitRange, StaticCoefficient
from tests.factories import make_cluster, make_recommendation, make_workload

pytestmark = pytest.mark.django_db


def deployment(name: str, containers: int = 2) -> str:
    items = "".join(
        f"      - name: c{index}\n"
        f"        resources: {{requests: {{cpu: 500m, memory: 256Mi}}}}\n"
        for index in range(containers)
    )
    return (
        f"apiVersion: apps/v1\nkind: Deployment\n"
        f"metadata: {{name: {name}, namespace: ns-{name[-1]}}}\n"
        f"spec:\n  template:\n    spec:\n      containers:\n{items}"
    )


@pytest.fixture
def known(db: Any) -> list[str]:
    """20 workloads in 10 namespaces, each container with a recommendation; LimitRanges
    and static coefficients for some namespaces, so every lookup has rows to find."""
    cluster = make_cluster("prod")
    names = []
    for index in range(20):
        name = f"web{index:02d}-{index % 10}"
        workload = make_workload(
            cluster,
            name,
            namespace=f"ns-{index % 10}",
            containers={"c0": {}, "c1": {}},
        )
        for container in workload.containers.all():
            make_recommendation(container, cpu_millicores=200, memory_bytes=2**27)
        names.append(name)
    for namespace in ("ns-1", "ns-2"):
        NamespaceLimitRange.objects.create(
            cluster=cluster,
            namespace=namespace,
            container_item={
                "type": "Container",
                "max": {"cpu_millicores": 4000, "memory_bytes": None},
            },
        )
    StaticCoefficient.objects.create(namespace="", cpu_factor=0.7)
    StaticCoefficient.objects.create(namespace="ns-3", cpu_factor=0.5)
    return names


def _queries(client: Client, body: str) -> tuple[int, dict[str, Any]]:
    with CaptureQueriesContext(connection) as captured:
        response = client.post(
            "/api/v1/rightsize", body, content_type="application/yaml"
        )
    assert response.status_code == 200, response.content
    return len(captured.captured_queries), response.json()


def test_rightsize_costs_the_same_queries_for_1_or_40_documents(
    read_client: Client, known: list[str]
) -> None:
    _queries(read_client, deployment(known[0]))  # the token's last-used stamp
    one, answer = _queries(read_client, deployment(known[0]))
    assert answer["summary"]["rightsized"] == 1
    documents = [deployment(name, containers=3) for name in known]
    documents += [deployment(f"unknown{i}-{i}") for i in range(20)]
    many, answer = _queries(read_client, "---\n".join(documents))
    assert answer["summary"]["documents"] == 40
    assert answer["summary"]["rightsized"] == 40  # 20 known, 20 by coefficient
    assert many == one, f"{one} queries for one document, {many} for 40"
    # The token, then the lookups of advise.inputs_for_pods (one cluster here).
    assert many <= 7


def test_recommendation_query_costs_a_fixed_number_of_queries(
    read_client: Client, known: list[str]
) -> None:
    counts = []
    for containers in (1, 1, 30):  # the first also stamps the token's last use
        query = {
            "metadata": {"namespace": "ns-0"},
            "spec": {
                "owner": {"kind": "Deployment", "name": known[0]},
                "pod": {
                    "spec": {
                        "containers": [
                            {"name": f"c{i}", "resources": {"requests": {"cpu": "1"}}}
                            for i in range(containers)
                        ]
                    }
                },
            },
        }
        with CaptureQueriesContext(connection) as captured:
            response = read_client.post(
                "/api/v1/recommendation-query", query, content_type="application/json"
            )
        assert response.status_code == 200, response.content
        counts.append(len(captured.captured_queries))
    assert counts[1] == counts[2], counts


@override_settings(API_MAX_CONTAINERS=10)
def test_too_many_containers_are_refused_before_any_lookup(
    read_client: Client, known: list[str]
) -> None:
    body = "---\n".join(deployment(name, containers=3) for name in known[:4])
    with CaptureQueriesContext(connection) as captured:
        response = read_client.post(
            "/api/v1/rightsize", body, content_type="application/yaml"
        )
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "too_large"
    assert "12 containers" in error["message"]
    assert "VPAWEB_API_MAX_CONTAINERS" in error["fields"]["body"][0]
    tables = " ".join(q["sql"] for q in captured.captured_queries)
    assert "recommender_workload" not in tables  # refused before the lookups
