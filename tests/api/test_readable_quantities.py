"""Memory people and kubectl read is a canonical quantity rounded UP
("729Mi", never "764046746"), except where rounding would cross a LimitRange max;
machine fields (the VPA-format recommendation, *_bytes) stay exact."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
import yaml
from django.test import Client
from django.utils import timezone

from recommender.engine.capping import LimitRangeItem
from recommender.engine.resources import Resources
from recommender.models import NamespaceLimitRange, Workload
from recommender.services.advice.limits import item_to_dict
from recommender.services.dashboard.workload_insight import workload_insight
from recommender.services.readmodels.provisioning import Prices
from tests.factories import make_recommendation

pytestmark = pytest.mark.django_db

MI = 2**20
EXACT = 764046746  # the raw bytes: 728.66 MiB
LIMIT = 2 * EXACT  # the app's limit:request ratio is 2 (2Gi:1Gi)

MANIFEST = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "resources": {
                            "requests": {"cpu": "1", "memory": "1Gi"},
                            "limits": {"cpu": "2", "memory": "2Gi"},
                        },
                    },
                    {
                        "name": "sidecar",
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                    },
                ]
            }
        }
    },
}


@pytest.fixture
def off_grid(shop: Workload) -> Workload:
    make_recommendation(
        shop.containers.get(name="app"), cpu_millicores=400, memory_bytes=EXACT
    )
    return shop


def _limit_range(workload: Workload, *, container_max=None, pod_max=None) -> None:
    NamespaceLimitRange.objects.create(
        cluster=workload.cluster,
        namespace=workload.namespace,
        container_item=item_to_dict(
            LimitRangeItem(type="Container", max=Resources(None, container_max))
        )
        if container_max
        else None,
        pod_item=item_to_dict(LimitRangeItem(type="Pod", max=Resources(None, pod_max)))
        if pod_max
        else None,
    )


def _rightsize(client: Client, manifest: Any, query: str = "") -> dict[str, Any]:
    response = client.post(
        f"/api/v1/rightsize{query}",
        json.dumps(manifest),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def _app(data: dict[str, Any]) -> dict[str, Any]:
    containers = data["manifests"][0]["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "app")["resources"]


def test_rightsize_writes_readable_quantities_and_is_idempotent(
    read_client: Client, off_grid: Workload
) -> None:
    data = _rightsize(read_client, MANIFEST)
    assert _app(data) == {
        "requests": {"cpu": "400m", "memory": "729Mi"},
        "limits": {"cpu": "800m", "memory": "1458Mi"},  # 1457.3 MiB rounded up
    }
    changes = data["documents"][0]["containers"][0]["changes"]
    assert [(c["field"], c["before"], c["after"]) for c in changes] == [
        ("requests.cpu", "1", "400m"),
        ("requests.memory", "1Gi", "729Mi"),
        ("limits.cpu", "2", "800m"),
        ("limits.memory", "2Gi", "1458Mi"),
    ]
    # Applying the output again changes nothing: 729Mi is at or above the target.
    again = _rightsize(read_client, data["manifests"][0])
    assert again["documents"][0]["status"] == "unchanged"
    assert _app(again) == _app(data)


def test_rounding_up_never_undoes_never_raise(
    read_client: Client, off_grid: Workload
) -> None:
    manifest = json.loads(json.dumps(MANIFEST))
    app = manifest["spec"]["template"]["spec"]["containers"][0]
    app["resources"]["requests"]["memory"] = str(EXACT + 4)  # above the target
    data = _rightsize(read_client, manifest, "?never_raise=true")
    # The target (4 bytes lower) rounds up to 729Mi, above the request: kept.
    assert _app(data)["requests"]["memory"] == str(EXACT + 4)
    fields = [c["field"] for c in data["documents"][0]["containers"][0]["changes"]]
    assert "requests.memory" not in fields


def test_a_container_limitrange_max_keeps_the_amount_exact(
    read_client: Client, off_grid: Workload
) -> None:
    # The limit at ratio 2 sits exactly on the max: 1458Mi would be refused.
    _limit_range(off_grid, container_max=LIMIT)
    data = _rightsize(read_client, MANIFEST)
    assert _app(data)["requests"]["memory"] == "729Mi"
    assert _app(data)["limits"]["memory"] == str(LIMIT)


def test_a_pod_limitrange_max_keeps_the_pods_amounts_exact(
    read_client: Client, off_grid: Workload
) -> None:
    _limit_range(off_grid, pod_max=LIMIT + 100)
    data = _rightsize(read_client, MANIFEST)
    assert _app(data)["requests"]["memory"] == str(EXACT)
    assert _app(data)["limits"]["memory"] == str(LIMIT)


def test_the_dashboard_patch_and_snippet_are_readable(off_grid: Workload) -> None:
    insight = workload_insight(
        workload_id=off_grid.pk, now=timezone.now(), prices=Prices.from_settings()
    )
    assert str(EXACT) not in insight.kubectl_patch + insight.resources_yaml
    patch = json.loads(insight.kubectl_patch.split("--patch ")[1].strip("'"))
    (app,) = patch["spec"]["template"]["spec"]["containers"]
    assert app["resources"] == {
        "requests": {"cpu": "400m", "memory": "729Mi"},
        "limits": {"cpu": "800m", "memory": "1458Mi"},
    }
    snippet = yaml.safe_load(insight.resources_yaml)
    assert snippet["resources"] == app["resources"]


def test_the_dashboard_patch_respects_the_limitrange_max(off_grid: Workload) -> None:
    _limit_range(off_grid, container_max=LIMIT)
    insight = workload_insight(
        workload_id=off_grid.pk, now=timezone.now(), prices=Prices.from_settings()
    )
    snippet = yaml.safe_load(insight.resources_yaml)
    assert snippet["resources"]["limits"]["memory"] == str(LIMIT)
    assert snippet["resources"]["requests"]["memory"] == "729Mi"


def test_exports_read_rounded_up_with_exact_bytes_beside(
    read_client: Client, off_grid: Workload
) -> None:
    rows = json.loads(
        read_client.get("/api/v1/recommendations/export?format=json").getvalue()
    )
    app = next(r for r in rows if r["container"] == "app")
    assert (app["target_memory"], app["target_memory_bytes"]) == ("729Mi", EXACT)
    lower, upper = int(EXACT * 0.8), int(EXACT * 1.2)  # the factory's bounds
    assert (app["lower_memory"], app["lower_memory_bytes"]) == ("583Mi", lower)
    assert (app["upper_memory"], app["upper_memory_bytes"]) == ("875Mi", upper)
    # Current requests are the cluster's values, exact.
    assert app["request_memory"] == "1Gi"
    as_csv = read_client.get("/api/v1/recommendations/export?format=csv")
    (row,) = [
        r
        for r in csv.DictReader(io.StringIO(as_csv.getvalue().decode()))
        if r["container"] == "app"
    ]
    assert row["target_memory"] == "729Mi"
    assert row["target_memory_bytes"] == str(EXACT)


def test_the_vpa_format_stays_exact_and_the_query_answer_is_readable(
    read_client: Client, off_grid: Workload
) -> None:
    # The status format is for machines (as upstream's); the requests to write are
    # what /rightsize writes.
    rec = read_client.get(f"/api/v1/workloads/{off_grid.pk}/recommendation").json()
    (app,) = [
        c
        for c in rec["recommendation"]["containerRecommendations"]
        if c["containerName"] == "app"
    ]
    assert app["target"]["memory"] == str(EXACT)
    query = read_client.post(
        "/api/v1/recommendation-query",
        {
            "metadata": {"namespace": "shop"},
            "spec": {
                "pod": {"spec": MANIFEST["spec"]["template"]["spec"]},
                "owner": {"kind": "Deployment", "name": "web"},
            },
        },
        content_type="application/json",
    ).json()
    status = query["status"]
    (app_rec,) = [
        c
        for c in status["recommendation"]["containerRecommendations"]
        if c["containerName"] == "app"
    ]
    assert app_rec["target"]["memory"] == str(EXACT)
    (app_write,) = [c for c in status["containers"] if c["containerName"] == "app"]
    assert app_write["requests"] == {"cpu": "400m", "memory": "729Mi"}
    assert app_write["limits"] == {"cpu": "800m", "memory": "1458Mi"}


def test_containers_left_alone_count_in_the_pod_sum(
    read_client: Client, off_grid: Workload
) -> None:
    # The sidecar (no recommendation) keeps its 128Mi limit; the pod's limits sum to
    # 100 bytes under the Pod max, so rounding the app's limit up would cross it.
    manifest = json.loads(json.dumps(MANIFEST))
    sidecar = manifest["spec"]["template"]["spec"]["containers"][1]
    sidecar["resources"]["limits"] = {"memory": "128Mi"}
    _limit_range(off_grid, pod_max=LIMIT + 128 * MI + 100)
    data = _rightsize(read_client, manifest)
    assert _app(data)["limits"]["memory"] == str(LIMIT)
    assert _app(data)["requests"]["memory"] == str(EXACT)


def test_the_large_increase_confirmation_reads_quantities() -> None:
    from recommender.services.policy.impact import LargeIncrease

    assert (
        LargeIncrease("app", "memory", EXACT, LIMIT).describe()
        == "app memory 729Mi → 1458Mi (2.0×)"
    )
