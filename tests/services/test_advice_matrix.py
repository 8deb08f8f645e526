"""One advice path: the dashboard's ``kubectl patch`` / YAML, ``/rightsize`` and
``/recommendation-query`` give the same numbers for the same pod, over container
policies x LimitRanges (with and without a default limit, a Pod max, RequestsOnly,
controlledResources, mode Off)."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
import yaml
from django.test import Client
from django.utils import timezone

from recommender.engine.capping import LimitRangeItem
from recommender.engine.resources import Resources
from recommender.models import ApiToken, NamespaceLimitRange, Policy
from recommender.roles import Role
from recommender.services.access.tokens import create_token
from recommender.services.advice.limits import item_to_dict
from tests.factories import make_cluster, make_recommendation, make_user, make_workload

pytestmark = pytest.mark.django_db

MI = 2**20
# app has limits (ratio 2), sidecar has none: the LimitRange default limit stands in.
CONTAINERS = {
    "app": {
        "request_cpu_millicores": 500,
        "request_memory_bytes": 512 * MI,
        "limit_cpu_millicores": 1000,
        "limit_memory_bytes": 1024 * MI,
    },
    "sidecar": {"request_cpu_millicores": 100, "request_memory_bytes": 64 * MI},
}
RECOMMENDED = {"app": (250, 300 * MI), "sidecar": (50, 100 * MI)}
POD = {
    "containers": [
        {
            "name": "app",
            "resources": {
                "requests": {"cpu": "500m", "memory": "512Mi"},
                "limits": {"cpu": "1", "memory": "1Gi"},
            },
        },
        {
            "name": "sidecar",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
        },
    ]
}

POLICIES: dict[str, list[dict[str, Any]]] = {
    "no-policy": [],
    "min-max": [
        {
            "containerName": "app",
            "minAllowed": {"cpu": "400m"},
            "maxAllowed": {"memory": "256Mi"},
        },
        {"containerName": "*", "minAllowed": {"memory": "128Mi"}},
    ],
    "requests-only": [{"containerName": "*", "controlledValues": "RequestsOnly"}],
    "cpu-only": [{"containerName": "*", "controlledResources": ["cpu"]}],
    "sidecar-off": [{"containerName": "sidecar", "mode": "Off"}],
}
LIMIT_RANGES: dict[str, tuple[LimitRangeItem | None, LimitRangeItem | None]] = {
    "no-limitrange": (None, None),
    "container-min-max": (
        LimitRangeItem(
            type="Container",
            min=Resources(cpu_millicores=300),
            max=Resources(memory_bytes=400 * MI),
        ),
        None,
    ),
    "container-default-limit": (
        LimitRangeItem(
            type="Container",
            max=Resources(cpu_millicores=800),
            default=Resources(cpu_millicores=1000, memory_bytes=1024 * MI),
        ),
        None,
    ),
    "pod-max": (
        None,
        LimitRangeItem(
            type="Pod", max=Resources(cpu_millicores=600, memory_bytes=600 * MI)
        ),
    ),
    "default-limit-and-pod-max": (
        LimitRangeItem(
            type="Container",
            default=Resources(cpu_millicores=400, memory_bytes=256 * MI),
        ),
        LimitRangeItem(type="Pod", max=Resources(cpu_millicores=700)),
    ),
}


def _setup(policy: str, limit_range: str) -> int:
    cluster = make_cluster("prod")
    workload = make_workload(cluster, "api", namespace="shop", containers=CONTAINERS)
    Policy.objects.filter(workload=workload).update(container_policies=POLICIES[policy])
    for container in workload.containers.all():
        cpu, memory = RECOMMENDED[container.name]
        make_recommendation(container, cpu_millicores=cpu, memory_bytes=memory)
    container_item, pod_item = LIMIT_RANGES[limit_range]
    if container_item or pod_item:
        NamespaceLimitRange.objects.create(
            cluster=cluster,
            namespace="shop",
            container_item=item_to_dict(container_item),
            pod_item=item_to_dict(pod_item),
        )
    return workload.pk


Numbers = dict[str, dict[str, dict[str, str]]]


def _dashboard(workload_id: int) -> tuple[Numbers, Numbers]:
    """What the workload page tells the operator to apply: from the kubectl patch
    and from the YAML snippet."""
    client = Client()
    client.force_login(make_user("vera", Role.VIEWER))
    page = client.get(f"/workloads/{workload_id}/").content.decode()
    patch_text = re.search(r'data-testid="kubectl-patch">(.*?)</pre>', page, re.S)
    yaml_text = re.search(r'data-testid="resources-yaml">(.*?)</pre>', page, re.S)
    if patch_text is None:
        return {}, {}
    assert yaml_text is not None
    command = html.unescape(patch_text.group(1))
    body = json.loads(command[command.index("'") + 1 : command.rindex("'")])
    pod_spec = body["spec"]["template"]["spec"]
    from_patch = {c["name"]: c["resources"] for c in pod_spec["containers"]}
    from_yaml = {}
    for part in html.unescape(yaml_text.group(1)).split("# container ")[1:]:
        name, _, rest = part.partition("\n")
        from_yaml[name] = yaml.safe_load(rest)["resources"]
    return from_patch, from_yaml


def _api_client() -> Client:
    _, key = create_token(
        name="ci", scope=ApiToken.Scope.READ, created_by=None, now=timezone.now()
    )
    return Client(HTTP_AUTHORIZATION=f"Bearer {key}")


def _rightsize(client: Client) -> dict[str, Any]:
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {"template": {"spec": POD}},
    }
    response = client.post(
        "/api/v1/rightsize?cluster=prod",
        json.dumps(manifest),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    spec = response.json()["manifests"][0]["spec"]["template"]["spec"]
    return {c["name"]: c.get("resources", {}) for c in spec["containers"]}


def _query(client: Client) -> dict[str, dict[str, Any]]:
    query = {
        "metadata": {"namespace": "shop"},
        "spec": {
            "cluster": "prod",
            "owner": {"kind": "Deployment", "name": "api"},
            "pod": {"spec": POD},
        },
    }
    response = client.post(
        "/api/v1/recommendation-query", query, content_type="application/json"
    )
    assert response.status_code == 200, response.content
    status = response.json()["status"]
    targets = {
        r["containerName"]: r["target"]
        for r in status["recommendation"]["containerRecommendations"]
    }
    return {
        c["containerName"]: {
            "target": targets.get(c["containerName"], {}),
            "requests": c["requests"],
            "limits": c["limits"],
        }
        for c in status["containers"]
    }


def _original(name: str) -> dict[str, Any]:
    container = next(c for c in POD["containers"] if c["name"] == name)
    return container["resources"]


@pytest.mark.parametrize("limit_range", list(LIMIT_RANGES))
@pytest.mark.parametrize("policy", list(POLICIES))
def test_dashboard_rightsize_and_query_agree(policy: str, limit_range: str) -> None:
    workload_id = _setup(policy, limit_range)
    from_patch, from_yaml = _dashboard(workload_id)
    client = _api_client()
    manifest = _rightsize(client)
    query = _query(client)

    assert "app" in from_patch  # every case advises app: nothing passes vacuously
    assert from_yaml == from_patch
    # Every container the dashboard would patch, /rightsize and the query advise alike.
    for name, advised in from_patch.items():
        requests = advised["requests"]
        original = _original(name)
        assert query[name]["target"] == requests
        assert query[name]["requests"] == requests
        assert manifest[name]["requests"] == {**original["requests"], **requests}
        limits = advised.get("limits", {})
        assert query[name]["limits"] == limits
        # /rightsize writes the same limits and keeps the others as they were.
        assert manifest[name].get("limits", {}) == {
            **original.get("limits", {}),
            **limits,
        }
    # A container the dashboard leaves alone is left alone by the API too.
    for name in ("app", "sidecar"):
        if name not in from_patch:
            assert query[name]["requests"] == {}
            assert manifest[name] == _original(name)


def test_the_default_limit_stands_in_for_a_missing_limit() -> None:
    """sidecar has no limit; the LimitRange's default (1 CPU, 1Gi) is its original
    limit, so its new limit keeps default:request (upstream GetProportionalLimit)."""
    workload_id = _setup("no-policy", "container-default-limit")
    from_patch, _ = _dashboard(workload_id)
    query = _query(_api_client())

    # 1000m x 50m / 100m and 1Gi x 100Mi / 64Mi.
    expected = {"cpu": "500m", "memory": "1600Mi"}
    assert from_patch["sidecar"]["limits"] == expected
    assert query["sidecar"]["limits"] == expected


def test_the_dashboard_snippet_is_capped_like_the_webhook() -> None:
    """The dashboard used to print the uncapped target; now it prints the target
    capped by the LimitRange and the policy."""
    workload_id = _setup("min-max", "container-min-max")
    from_patch, _ = _dashboard(workload_id)

    # app: cpu 250m raised to the LimitRange min 300m, then to minAllowed 400m;
    # memory 300Mi capped so that its limit (ratio 2) fits the LimitRange max
    # 400Mi: 200Mi. sidecar: 50m raised to the LimitRange min 300m, memory 100Mi
    # raised to the "*" policy's minAllowed 128Mi.
    assert from_patch["app"]["requests"] == {"cpu": "400m", "memory": "200Mi"}
    assert from_patch["sidecar"]["requests"] == {"cpu": "300m", "memory": "128Mi"}
