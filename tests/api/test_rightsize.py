"""POST /api/v1/rightsize: manifests in, right-sized manifests and a report out."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from django.test import Client, override_settings

from recommender.models import Policy, StaticCoefficient, Workload
from tests.factories import make_cluster, make_workload

pytestmark = pytest.mark.django_db

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      initContainers:
      - {name: migrate, image: shop/migrate}
      containers:
      - name: app
        image: shop/web:1.4
        resources:
          requests: {cpu: "1", memory: 1Gi, ephemeral-storage: 1Gi}
          limits: {cpu: "2", memory: 2Gi}
      - name: sidecar
        resources:
          requests: {cpu: 100m, memory: 64Mi}
"""


def rightsize(
    client: Client, body: str, query: str = "", content_type: str = "application/yaml"
):
    return client.post(f"/api/v1/rightsize{query}", body, content_type=content_type)


def container(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    spec = manifest["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] if c["name"] == name)


def test_requests_follow_the_recommendation_and_limits_keep_their_ratio(
    read_client: Client, shop: Workload
) -> None:
    response = rightsize(read_client, DEPLOYMENT)
    assert response.status_code == 200
    data = response.json()
    app = container(data["manifests"][0], "app")
    assert app["resources"] == {
        "requests": {"cpu": "587m", "memory": "250Mi", "ephemeral-storage": "1Gi"},
        "limits": {"cpu": "1174m", "memory": "500Mi"},
    }
    # The sidecar has no recommendation and no coefficient is configured: untouched.
    assert container(data["manifests"][0], "sidecar")["resources"] == {
        "requests": {"cpu": "100m", "memory": "64Mi"}
    }
    document = data["documents"][0]
    assert document["status"] == "rightsized"
    assert document["workload"] == {
        "id": shop.pk,
        "cluster": "prod",
        "namespace": "shop",
        "kind": "Deployment",
        "name": "web",
    }
    report = {c["name"]: c for c in document["containers"]}
    assert [
        (c["field"], c["before"], c["after"]) for c in report["app"]["changes"]
    ] == [
        ("requests.cpu", "1", "587m"),
        ("requests.memory", "1Gi", "250Mi"),
        ("limits.cpu", "2", "1174m"),
        ("limits.memory", "2Gi", "500Mi"),
    ]
    assert "latest recommendation of shop/Deployment/web" in report["app"]["reason"]
    assert (
        report["app"]["changes"][2]["reason"]
        == "kept the original limit:request ratio 2"
    )
    assert report["sidecar"]["source"] == "none"
    assert "no static coefficient" in report["sidecar"]["reason"]
    assert (
        report["migrate"]["source"] == "none"
        and "init container" in report["migrate"]["reason"]
    )
    assert data["summary"] == {
        "documents": 1,
        "rightsized": 1,
        "unchanged": 0,
        "passed_through": 0,
        "containers_changed": 1,
    }


def test_requests_only_policy_leaves_limits_and_caps_are_reported(
    read_client: Client, shop: Workload
) -> None:
    Policy.objects.filter(workload=shop).update(
        container_policies=[
            {
                "containerName": "app",
                "mode": "Auto",
                "maxAllowed": {"cpu": "500m"},
                "controlledResources": ["cpu", "memory"],
                "controlledValues": "RequestsOnly",
            }
        ]
    )
    data = rightsize(read_client, DEPLOYMENT).json()
    app = container(data["manifests"][0], "app")
    assert app["resources"]["requests"]["cpu"] == "500m"
    assert app["resources"]["limits"] == {"cpu": "2", "memory": "2Gi"}
    notes = data["documents"][0]["containers"][0]["notes"]
    assert "cpu capped to maxAllowed" in notes
    assert any("RequestsOnly" in note for note in notes)


def test_container_policy_off_leaves_the_container_alone(
    read_client: Client, shop: Workload
) -> None:
    Policy.objects.filter(workload=shop).update(
        container_policies=[{"containerName": "app", "mode": "Off"}]
    )
    data = rightsize(read_client, DEPLOYMENT).json()
    assert container(data["manifests"][0], "app")["resources"]["requests"]["cpu"] == "1"
    assert data["documents"][0]["status"] == "unchanged"
    assert "mode is Off" in data["documents"][0]["containers"][0]["reason"]


@pytest.mark.parametrize(
    ("query", "cpu", "memory", "cpu_limit"),
    [
        ("?multiplier=1.2", "705m", "300Mi", "1410m"),
        ("?multiplier=2&never_raise=true", "1", "500Mi", "2"),
        ("?leave_memory=true", "587m", "1Gi", "1174m"),
    ],
)
def test_seed_004_correction_options(
    read_client: Client,
    shop: Workload,
    query: str,
    cpu: str,
    memory: str,
    cpu_limit: str,
) -> None:
    data = rightsize(read_client, DEPLOYMENT, query).json()
    resources = container(data["manifests"][0], "app")["resources"]
    assert resources["requests"]["cpu"] == cpu
    assert resources["requests"]["memory"] == memory
    assert resources["limits"]["cpu"] == cpu_limit


def test_never_raise_is_explained(read_client: Client, shop: Workload) -> None:
    data = rightsize(read_client, DEPLOYMENT, "?multiplier=2&never_raise=true").json()
    notes = data["documents"][0]["containers"][0]["notes"]
    assert "cpu kept at the original request 1 instead of 1174m (never_raise)" in notes


@pytest.mark.parametrize(
    "query", ["?multiplier=0", "?multiplier=11", "?multiplier=abc"]
)
def test_bad_multiplier_is_rejected(
    read_client: Client, shop: Workload, query: str
) -> None:
    response = rightsize(read_client, DEPLOYMENT, query)
    assert response.status_code == 400
    assert "multiplier" in response.json()["error"]["fields"]


UNKNOWN = """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: cache, namespace: team-a}
spec:
  template:
    spec:
      containers:
      - name: redis
        resources:
          requests: {cpu: "2", memory: 4Gi}
          limits: {cpu: "4", memory: 4Gi}
"""


def test_unknown_workloads_get_the_namespace_coefficient_else_the_global_one(
    read_client: Client, db: Any
) -> None:
    StaticCoefficient.objects.create(namespace="", cpu_factor=0.5)
    StaticCoefficient.objects.create(
        namespace="team-a", cpu_factor=0.8, memory_factor=0.75
    )
    data = rightsize(read_client, UNKNOWN).json()
    resources = container(data["manifests"][0], "redis")["resources"]
    assert resources == {
        "requests": {"cpu": "1600m", "memory": "3Gi"},
        "limits": {"cpu": "3200m", "memory": "3Gi"},
    }
    report = data["documents"][0]["containers"][0]
    assert report["source"] == "static_coefficient"
    assert "vpaweb does not know this workload yet" in report["reason"]
    assert "namespace team-a" in report["reason"]

    other = rightsize(read_client, UNKNOWN.replace("team-a", "team-b")).json()
    resources = container(other["manifests"][0], "redis")["resources"]
    assert resources["requests"] == {"cpu": "1", "memory": "4Gi"}  # global: CPU only
    assert "the global default" in other["documents"][0]["containers"][0]["reason"]


def test_unknown_workload_without_coefficient_is_returned_unchanged(
    read_client: Client, db: Any
) -> None:
    data = rightsize(read_client, UNKNOWN).json()
    assert data["manifests"][0] == yaml.safe_load(UNKNOWN)
    assert data["documents"][0]["status"] == "unchanged"


MIXED = """\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: settings}
  data: {a: "1"}
- apiVersion: batch/v1
  kind: CronJob
  metadata: {name: report, namespace: shop}
  spec:
    schedule: "0 * * * *"
    jobTemplate:
      spec:
        template:
          spec:
            containers:
            - name: report
              resources: {requests: {cpu: 500m}}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w}
spec: {size: 3}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-5d8f7c9b4-abcde
  namespace: shop
  labels: {pod-template-hash: 5d8f7c9b4}
  ownerReferences:
  - apiVersion: apps/v1
    kind: ReplicaSet
    name: web-5d8f7c9b4
    controller: true
    uid: x
spec:
  containers:
  - name: app
    resources: {requests: {cpu: "1"}}
"""


def test_lists_cronjobs_pods_and_unknown_kinds(
    read_client: Client, shop: Workload
) -> None:
    make_workload(
        shop.cluster,
        "report",
        namespace="shop",
        kind="CronJob",
        containers={"report": {"request_cpu_millicores": 500}},
    )
    StaticCoefficient.objects.create(namespace="", cpu_factor=0.5)
    data = rightsize(read_client, MIXED).json()
    statuses = [(d["path"], d["kind"], d["status"]) for d in data["documents"]]
    assert statuses == [
        ("documents[0].items[0]", "ConfigMap", "passed_through"),
        ("documents[0].items[1]", "CronJob", "rightsized"),
        ("documents[1]", "Widget", "passed_through"),
        ("documents[2]", "Pod", "rightsized"),
    ]
    assert "kind Widget has no pod template" in data["documents"][2]["reason"]
    cron = data["manifests"][0]["items"][1]
    job_container = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    # Known workload without a recommendation: the static coefficient applies.
    assert job_container["resources"]["requests"]["cpu"] == "250m"
    assert data["manifests"][1] == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 3},
    }
    # The pod's ReplicaSet belongs to Deployment web, whose recommendation applies.
    pod = data["documents"][3]
    assert pod["workload"]["name"] == "web" and pod["workload"]["kind"] == "Deployment"
    assert (
        data["manifests"][2]["spec"]["containers"][0]["resources"]["requests"]["cpu"]
        == "587m"
    )


def test_json_bodies_object_and_array(read_client: Client, shop: Workload) -> None:
    manifest = yaml.safe_load(DEPLOYMENT)
    single = rightsize(
        read_client, json.dumps(manifest), content_type="application/json"
    )
    assert (
        container(single.json()["manifests"][0], "app")["resources"]["requests"]["cpu"]
        == "587m"
    )
    many = rightsize(
        read_client,
        json.dumps([manifest, {"kind": "Service", "apiVersion": "v1"}]),
        content_type="application/json",
    )
    assert [d["status"] for d in many.json()["documents"]] == [
        "rightsized",
        "passed_through",
    ]


def test_yaml_output_is_ready_for_kubectl(read_client: Client, shop: Workload) -> None:
    response = read_client.post(
        "/api/v1/rightsize",
        DEPLOYMENT + "---\nkind: Service\napiVersion: v1\n",
        content_type="application/yaml",
        HTTP_ACCEPT="application/yaml",
    )
    assert response.status_code == 200 and response["Content-Type"].startswith(
        "application/yaml"
    )
    text = response.content.decode()
    assert "# Deployment/web app requests.cpu: 1 -> 587m" in text
    documents = list(yaml.safe_load_all(text))
    assert [d["kind"] for d in documents] == ["Deployment", "Service"]
    assert container(documents[0], "app")["resources"]["limits"]["memory"] == "500Mi"


def test_aliases_are_expanded_so_containers_stay_independent(
    read_client: Client, shop: Workload
) -> None:
    body = DEPLOYMENT.replace(
        "      - name: sidecar\n"
        "        resources:\n"
        "          requests: {cpu: 100m, memory: 64Mi}\n",
        "",
    ).replace(
        '        resources:\n          requests: {cpu: "1"',
        '        resources: &r\n          requests: {cpu: "1"',
    )
    body += "      - name: copy\n        resources: *r\n"
    data = rightsize(read_client, body).json()
    assert (
        container(data["manifests"][0], "app")["resources"]["requests"]["cpu"] == "587m"
    )
    assert (
        container(data["manifests"][0], "copy")["resources"]["requests"]["cpu"] == "1"
    )


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ("kind: Deployment\nmetadata: {name: web\n", "body", "not valid YAML at line"),
        ("", "body", "holds no manifests"),
        ("- 1\n- 2\n", "documents[0]", "must be a Kubernetes object"),
        ("metadata: {name: x}\n", "documents[0].kind", "kind is required"),
        (
            DEPLOYMENT.replace('cpu: "1"', "cpu: 12 cores"),
            "documents[0].spec.template.spec.containers[0].resources.requests.cpu",
            "'12 cores'",
        ),
        (
            DEPLOYMENT.replace("memory: 2Gi", "memory: -1Gi"),
            "documents[0].spec.template.spec.containers[0].resources.limits.memory",
            "negative",
        ),
        (
            "kind: Deployment\nspec: {template: {spec: {}}}\n",
            "documents[0].spec.template.spec.containers",
            "is required",
        ),
        ("kind: Deployment\nspec: {}\n", "documents[0].spec.template", "missing"),
        (
            "kind: Pod\nspec: {containers: [{name: a}, {name: a}]}\n",
            "documents[0].spec.containers[1].name",
            "used by two containers",
        ),
        (
            "kind: Widget\nspec: !!binary aGVsbG8=\n",
            "documents[0]",
            "JSON cannot represent",
        ),
    ],
)
def test_bad_manifests_name_what_is_wrong(
    read_client: Client, shop: Workload, body: str, field: str, message: str
) -> None:
    response = rightsize(read_client, body)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    # A body that is not YAML at all is "malformed"; a wrong manifest is "invalid".
    assert error["code"] == ("malformed" if "valid YAML" in message else "invalid")
    assert field in error["fields"], error
    assert message in error["message"], error


def test_yaml_alias_bomb_is_refused(read_client: Client, db: Any) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 8):
        refs = ", ".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{refs}]")
    body = "kind: Widget\n" + "\n".join(lines) + "\n"
    response = rightsize(read_client, body)
    assert response.status_code == 413
    error = response.json()["error"]
    assert "aliases expanded" in error["message"]
    assert "VPAWEB_API_MAX_NODES" in error["fields"]["body"][0]


@override_settings(API_MAX_BODY_BYTES=4096)
def test_huge_body_is_a_clear_413(read_client: Client, db: Any) -> None:
    body = DEPLOYMENT + "---\n" + "# padding\n" * 1000
    response = rightsize(read_client, body)
    assert response.status_code == 413
    message = (
        f"the request body has {len(body)} bytes; the limit is 4096 bytes "
        "(VPAWEB_API_MAX_BODY_BYTES)"
    )
    assert response.json()["error"] == {
        "code": "too_large",
        "message": message,
        "fields": {"body": [message]},
    }


def test_unsupported_content_type_is_415(read_client: Client, db: Any) -> None:
    response = rightsize(read_client, "<xml/>", content_type="application/xml")
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"


def test_cluster_option(read_client: Client, shop: Workload) -> None:
    unknown = rightsize(read_client, DEPLOYMENT, "?cluster=nope")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["message"] == "cluster 'nope' does not exist"
    make_workload(make_cluster("staging"), "web", namespace="shop")
    ambiguous = rightsize(read_client, DEPLOYMENT)
    assert ambiguous.status_code == 400
    assert "cluster" in ambiguous.json()["error"]["fields"]
    chosen = rightsize(read_client, DEPLOYMENT, "?cluster=prod")
    assert chosen.json()["documents"][0]["workload"]["cluster"] == "prod"


def test_the_yaml_output_says_right_sized_only_when_something_changed(
    read_client: Client, shop: Workload
) -> None:
    changed = rightsize(read_client, DEPLOYMENT, "?format=yaml").content.decode()
    assert changed.startswith("# Right-sized by vpaweb.\n# Deployment/")
    assert [d["kind"] for d in yaml.safe_load_all(changed)] == ["Deployment"]

    unchanged = rightsize(read_client, UNKNOWN, "?format=yaml").content.decode()
    assert "Right-sized" not in unchanged
    # Left alone, and says why in comments only.
    assert unchanged.startswith("# Left as they are by vpaweb:\n"), unchanged
    assert "unknown workload" in unchanged
    assert list(yaml.safe_load_all(unchanged)) == [yaml.safe_load(UNKNOWN)]
