"""POST /api/v1/clusters/{c}/namespaces/{ns}/compare-profiles."""

from __future__ import annotations

import json
from typing import Any

from django.test import Client

from recommender.models import Workload


def _post(client: Client, cluster: str, namespace: str, body: Any) -> Any:
    return client.post(
        f"/api/v1/clusters/{cluster}/namespaces/{namespace}/compare-profiles",
        json.dumps(body),
        content_type="application/json",
    )


def test_a_read_token_gets_totals_and_worst_workloads(
    read_client: Client, sim_workload: Workload
) -> None:
    response = _post(
        read_client,
        sim_workload.cluster.name,
        sim_workload.namespace,
        {
            "profile_a": "vpa",
            "profile_b": "adaptive-margin",
            "profile_b_overrides": {"memory_margin_max": 0.5},
            "days": 2,
            "worst": 2,
        },
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert [r["role"] for r in body["rows"]] == ["a", "b"]
    assert body["rows"][1]["profile"] == "adaptive-margin[memory_margin_max=0.5]"
    assert body["b"] == {
        "profile": "adaptive-margin",
        "overrides": {"memory_margin_max": 0.5},
    }
    assert 1 <= len(body["worst"]) <= 2
    assert body["worst"][0]["workload"].startswith(f"{sim_workload.namespace}/")
    assert body["rows"][0]["container_days"] >= 1


def test_errors_use_the_one_shape(read_client: Client, sim_workload: Workload) -> None:
    cluster, ns = sim_workload.cluster.name, sim_workload.namespace
    bad = _post(read_client, cluster, ns, {"profile_a": "vpa", "profile_b": "nope"})
    assert bad.status_code == 400
    assert "profile_b" in bad.json()["error"]["fields"]
    bad = _post(
        read_client,
        cluster,
        ns,
        {
            "profile_a": "vpa",
            "profile_b": "vpa",
            "profile_b_overrides": {"margin_fraction": 7},
        },
    )
    assert bad.status_code == 400
    assert "profile_overrides.margin_fraction" in bad.json()["error"]["fields"]
    missing = _post(
        read_client, "no-such", ns, {"profile_a": "vpa", "profile_b": "vpa"}
    )
    assert missing.status_code == 404
    empty = _post(
        read_client, cluster, "nothing-here", {"profile_a": "vpa", "profile_b": "vpa"}
    )
    assert empty.status_code == 404
