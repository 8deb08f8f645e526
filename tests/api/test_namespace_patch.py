"""GET /api/v1/clusters/{c}/namespaces/{ns}/patch: a pull request's worth of change."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from django.test import Client

from recommender.models import Workload
from tests.factories import make_recommendation, make_workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def neighbours(shop: Workload) -> dict[str, Workload]:
    """Beside shop/web (outside tolerance): api, within it, and a labelled batch job."""
    api = make_workload(
        shop.cluster,
        "api",
        namespace="shop",
        containers={
            "api": {"request_cpu_millicores": 500, "request_memory_bytes": 512 * 2**20}
        },
    )
    make_recommendation(
        api.containers.get(), cpu_millicores=480, memory_bytes=500 * 2**20
    )
    batch = make_workload(
        shop.cluster,
        "batch",
        namespace="shop",
        containers={
            "worker": {
                "request_cpu_millicores": 4000,
                "request_memory_bytes": 8 * 2**30,
            }
        },
    )
    Workload.objects.filter(pk=batch.pk).update(labels={"team": "data", "tier": "x"})
    make_recommendation(batch.containers.get(), cpu_millicores=300, memory_bytes=2**30)
    return {"api": api, "batch": batch}


def _get(client: Client, query: str = "") -> Any:
    return client.get(f"/api/v1/clusters/prod/namespaces/shop/patch{query}")


def test_only_workloads_outside_tolerance_are_patched_with_a_summary(
    read_client: Client, shop: Workload, neighbours: dict[str, Workload]
) -> None:
    response = _get(read_client)
    assert response.status_code == 200, response.content
    answer = response.json()
    assert [w["workload"]["name"] for w in answer["workloads"]] == ["batch", "web"]
    assert answer["checked"] == {"containers": 4, "ok": 1, "drift": 2, "unchecked": 1}
    files = answer["patches"]["files"]
    assert sorted(files) == [
        "patches/deployment-shop-batch.yaml",
        "patches/deployment-shop-web.yaml",
    ]
    web = yaml.safe_load(files["patches/deployment-shop-web.yaml"])
    containers = web["spec"]["template"]["spec"]["containers"]
    # app is outside tolerance; sidecar has no recommendation: named only, for order.
    assert containers == [
        {
            "name": "app",
            "resources": {
                "requests": {"cpu": "587m", "memory": "250Mi"},
                "limits": {"cpu": "1174m", "memory": "500Mi"},
            },
        },
        {"name": "sidecar"},
    ]
    markdown = answer["summary_markdown"]
    assert markdown.startswith(
        "## Right-size 2 workload(s) of `shop` in cluster `prod`\n"
    )
    assert (
        f"| [Deployment/web](http://testserver/workloads/{shop.pk}/) | app | cpu | "
        "1 | 587m | -41.3 % |" in markdown
    )
    assert "### Why" in markdown and "### Savings and risk" in markdown
    assert "memory request lowered to 250Mi" in markdown
    assert answer["savings_monthly"] == pytest.approx(
        sum(w["savings_monthly"] for w in answer["workloads"])
    )
    assert answer["savings_monthly"] > 0


def test_a_selector_and_the_tolerance_narrow_it(
    read_client: Client, shop: Workload, neighbours: dict[str, Workload]
) -> None:
    selected = _get(read_client, "?selector=team=data,tier").json()
    assert [w["workload"]["name"] for w in selected["workloads"]] == ["batch"]
    assert "(workloads matching `team=data,tier`)" in selected["summary_markdown"]
    loose = _get(read_client, "?cpu_floor=10&memory_floor=16Gi").json()
    assert loose["workloads"] == []
    assert loose["patches"]["files"] == {}
    assert "Nothing to change." in loose["summary_markdown"]


def test_bad_input_is_named(read_client: Client, shop: Workload) -> None:
    assert _get(read_client, "?selector=team==x").status_code == 400
    missing = read_client.get("/api/v1/clusters/nowhere/namespaces/shop/patch")
    assert missing.status_code == 404
    assert _get(read_client, "?selectr=a").json()["error"]["fields"] == {
        "selectr": [
            "unknown query parameter; this endpoint takes cpu_floor, cpu_percent, "
            "include_short_history, memory_floor, memory_percent, selector"
        ]
    }
