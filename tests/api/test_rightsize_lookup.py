"""Rightsize and RecommendationQuery: container policies bind the static coefficient
too, and only active workloads are looked up (review findings 4 and 5)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from django.test import Client

from recommender.models import Policy, StaticCoefficient
from tests.factories import make_cluster, make_recommendation, make_workload

pytestmark = pytest.mark.django_db

MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop}
spec:
  template:
    spec:
      containers:
      - name: app
        resources:
          requests: {cpu: "1", memory: 1Gi}
      - name: proxy
        resources:
          requests: {cpu: 200m, memory: 128Mi}
"""


def rightsize(client: Client, query: str = "") -> dict[str, Any]:
    response = client.post(
        f"/api/v1/rightsize{query}", MANIFEST, content_type="application/yaml"
    )
    assert response.status_code == 200, response.content
    return response.json()


def requests_of(data: dict[str, Any], name: str) -> dict[str, str]:
    spec = data["manifests"][0]["spec"]["template"]["spec"]
    item = next(c for c in spec["containers"] if c["name"] == name)
    return item["resources"]["requests"]


def report_of(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in data["documents"][0]["containers"] if c["name"] == name)


def known_api(cluster_name: str = "prod", *, container_policies: list | None = None):
    """Deployment shop/api known to vpaweb, with no recommendation yet."""
    workload = make_workload(
        make_cluster(cluster_name),
        "api",
        namespace="shop",
        containers={
            "app": {"request_cpu_millicores": 1000},
            "proxy": {"request_cpu_millicores": 200},
        },
    )
    if container_policies is not None:
        Policy.objects.filter(workload=workload).update(
            container_policies=container_policies
        )
    return workload


def test_static_coefficient_leaves_containers_whose_policy_mode_is_off(
    read_client: Client,
) -> None:
    StaticCoefficient.objects.create(namespace="", cpu_factor=0.5, memory_factor=0.5)
    known_api(container_policies=[{"containerName": "proxy", "mode": "Off"}])

    data = rightsize(read_client)

    assert requests_of(data, "app") == {"cpu": "500m", "memory": "512Mi"}
    assert requests_of(data, "proxy") == {"cpu": "200m", "memory": "128Mi"}
    proxy = report_of(data, "proxy")
    assert proxy["source"] == "none"
    assert "mode is Off" in proxy["reason"]
    assert proxy["changes"] == []


def test_static_coefficient_scales_only_controlled_resources(
    read_client: Client,
) -> None:
    StaticCoefficient.objects.create(namespace="", cpu_factor=0.5, memory_factor=0.5)
    known_api(
        container_policies=[{"containerName": "*", "controlledResources": ["cpu"]}]
    )

    data = rightsize(read_client)

    # CPU halves; memory, which the policy does not control, keeps its request.
    assert requests_of(data, "app") == {"cpu": "500m", "memory": "1Gi"}
    assert requests_of(data, "proxy") == {"cpu": "100m", "memory": "128Mi"}


def test_coefficient_on_an_uncontrolled_resource_only_leaves_the_container(
    read_client: Client,
) -> None:
    StaticCoefficient.objects.create(namespace="", memory_factor=0.5)
    known_api(
        container_policies=[{"containerName": "*", "controlledResources": ["cpu"]}]
    )

    data = rightsize(read_client)

    assert data["manifests"][0] == yaml.safe_load(MANIFEST)
    assert "controls" in report_of(data, "app")["reason"]


def test_recommendation_query_static_target_respects_the_container_policy(
    read_client: Client,
) -> None:
    StaticCoefficient.objects.create(namespace="", cpu_factor=0.5, memory_factor=0.5)
    known_api(
        container_policies=[
            {"containerName": "app", "controlledResources": ["memory"]},
            {"containerName": "proxy", "mode": "Off"},
        ]
    )
    query = {
        "metadata": {"namespace": "shop"},
        "spec": {
            "owner": {"kind": "Deployment", "name": "api"},
            "pod": yaml.safe_load(MANIFEST)["spec"]["template"],
        },
    }

    answer = read_client.post(
        "/api/v1/recommendation-query", query, content_type="application/json"
    ).json()

    assert answer["status"]["recommendation"]["containerRecommendations"] == [
        {"containerName": "app", "target": {"memory": "512Mi"}}
    ]


def test_inactive_workload_is_unknown_and_its_stale_recommendation_unused(
    read_client: Client,
) -> None:
    deleted = known_api()
    make_recommendation(deleted.containers.get(name="app"), cpu_millicores=111)
    deleted.is_active = False
    deleted.save(update_fields=["is_active"])

    data = rightsize(read_client)

    # Treated as unknown: no coefficient configured, so the manifest is unchanged.
    assert data["manifests"][0] == yaml.safe_load(MANIFEST)
    assert data["documents"][0]["workload"] is None
    assert "does not know this workload" in report_of(data, "app")["reason"]


def test_inactive_twin_in_another_cluster_does_not_make_the_key_ambiguous(
    read_client: Client,
) -> None:
    deleted = known_api("old")
    deleted.is_active = False
    deleted.save(update_fields=["is_active"])
    live = known_api("prod")
    make_recommendation(live.containers.get(name="app"), cpu_millicores=587)

    data = rightsize(read_client)

    assert data["documents"][0]["workload"]["cluster"] == "prod"
    assert requests_of(data, "app")["cpu"] == "587m"


# Limits equal to requests: a LimitRange's Max bounds limits, and upstream turns it into
# a bound on the request through the container's request:limit ratio (1 here).
WITH_LIMITS = MANIFEST.replace(
    'requests: {cpu: "1", memory: 1Gi}',
    'requests: {cpu: "1", memory: 1Gi}\n          limits: {cpu: "1", memory: 1Gi}',
).replace(
    "requests: {cpu: 200m, memory: 128Mi}",
    "requests: {cpu: 200m, memory: 128Mi}\n"
    "          limits: {cpu: 200m, memory: 128Mi}",
)


def rightsize_with_limits(client: Client) -> dict[str, Any]:
    response = client.post(
        "/api/v1/rightsize", WITH_LIMITS, content_type="application/yaml"
    )
    assert response.status_code == 200, response.content
    return response.json()


def _limit_range(workload, *, container_max=None, pod_max=None) -> None:
    from recommender.engine.capping import LimitRangeItem
    from recommender.engine.resources import Resources
    from recommender.models import NamespaceLimitRange
    from recommender.services.advice.limits import item_to_dict

    NamespaceLimitRange.objects.create(
        cluster=workload.cluster,
        namespace=workload.namespace,
        container_item=item_to_dict(
            LimitRangeItem(type="Container", max=Resources(*container_max))
        )
        if container_max
        else None,
        pod_item=item_to_dict(LimitRangeItem(type="Pod", max=Resources(*pod_max)))
        if pod_max
        else None,
    )


def test_namespace_limit_range_caps_the_recommendation_and_says_so(
    read_client: Client,
) -> None:
    workload = known_api()
    make_recommendation(workload.containers.get(name="app"), cpu_millicores=587)
    _limit_range(workload, container_max=(300, None))

    data = rightsize_with_limits(read_client)

    assert requests_of(data, "app")["cpu"] == "300m"
    assert (
        "cpu capped to fit Max in container LimitRange"
        in report_of(data, "app")["notes"]
    )
    query = {
        "metadata": {"namespace": "shop"},
        "spec": {
            "owner": {"kind": "Deployment", "name": "api"},
            "pod": yaml.safe_load(WITH_LIMITS)["spec"]["template"],
        },
    }
    answer = read_client.post(
        "/api/v1/recommendation-query", query, content_type="application/json"
    ).json()
    (app,) = answer["status"]["recommendation"]["containerRecommendations"]
    assert app["target"]["cpu"] == "300m" and app["uncappedTarget"]["cpu"] == "587m"
    caps = {c["containerName"]: c["caps"] for c in answer["status"]["containers"]}
    assert caps["app"] == ["cpu capped to fit Max in container LimitRange"]


def test_pod_limit_range_leaves_containers_without_recommendation_alone(
    read_client: Client,
) -> None:
    workload = known_api()
    make_recommendation(workload.containers.get(name="app"), cpu_millicores=587)
    # Pod max 500m: app's 587m and proxy's 200m are shared in proportion; proxy, with
    # no recommendation, keeps its request (upstream's webhook would scale it too).
    _limit_range(workload, pod_max=(500, None))

    data = rightsize_with_limits(read_client)

    assert requests_of(data, "proxy") == {"cpu": "200m", "memory": "128Mi"}
    assert report_of(data, "proxy")["changes"] == []
    # The engine shares the Pod max in proportion (587 of 587 + 200): about 372m.
    app_cpu = requests_of(data, "app")["cpu"]
    assert app_cpu.endswith("m") and 360 <= int(app_cpu[:-1]) <= 380
