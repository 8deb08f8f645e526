"""HPA-aware advice: the HPA target that keeps its scaling beside every
recommendation (workload page, API, /rightsize, recommendation-query), and actuation
leaving the resources an HPA scales on alone (updater and webhook)."""

from __future__ import annotations

import pytest
import yaml
from django.urls import reverse

from recommender.cluster.base import ContainerSpec, PodInfo
from recommender.engine.resources import Resources
from recommender.models import Workload
from recommender.services.admission.decision import advise_containers
from recommender.services.admission.pod import PodContainerRef
from recommender.services.admission.snapshot import WorkloadEntry
from recommender.services.advice.advise import (
    advise,
    capped_recommendations,
    inputs_for_workload,
    workload_pod,
)
from tests.factories import make_cluster, make_recommendation, make_workload
from tests.web.conftest import client_for

pytestmark = pytest.mark.django_db
MIB = 2**20
# An autoscaling/v2 HPA on 70 % CPU utilization, as discovery stores it.
CPU_HPA = [
    {
        "name": "web",
        "resources": ["cpu"],
        "metrics": [
            {
                "resource": "cpu",
                "container": "",
                "target_type": "Utilization",
                "average_utilization": 70,
                "average_value": None,
            }
        ],
    }
]
ADJUSTED = {"type": "Utilization", "averageUtilization": 140}
MANIFESTS = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      containers:
      - name: app
        resources:
          requests: {cpu: 500m, memory: 512Mi}
          limits: {cpu: "1", memory: 1Gi}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: shop}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 10
  metrics:
  - type: Resource
    resource:
      name: cpu
      target: {type: Utilization, averageUtilization: 70}
  - type: ContainerResource
    containerResource:
      name: memory
      container: app
      target: {type: AverageValue, averageValue: 400Mi}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: other, namespace: shop}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: elsewhere}
  maxReplicas: 3
  metrics:
  - type: Resource
    resource:
      name: cpu
      target: {type: Utilization, averageUtilization: 60}
"""


@pytest.fixture
def scaled() -> Workload:
    """shop/web: app requests 500m and 512Mi, recommended 250m and 300Mi; an HPA
    scales it on 70 % CPU utilization."""
    workload = make_workload(make_cluster(), "web", namespace="shop")
    make_recommendation(workload.containers.get(name="app"))
    Workload.objects.filter(pk=workload.pk).update(hpa_conflicts=CPU_HPA)
    workload.refresh_from_db()
    return workload


def test_the_api_gives_the_hpa_target_that_keeps_the_scaling(viewer, scaled):
    data = (
        client_for(viewer).get(f"/api/v1/workloads/{scaled.pk}/recommendation").json()
    )

    (change,) = data["hpaAdjustments"]
    # 70 % of 500m = 350m per pod; at 250m the same trigger is 140 %.
    assert change["before"] == {"type": "Utilization", "averageUtilization": 70}
    assert change["after"] == ADJUSTED
    assert change["scales_out_at"] == "350m"
    assert change["changed"] is True


def test_a_workload_without_an_hpa_has_no_hpa_change(viewer):
    workload = make_workload(make_cluster(), "db")
    make_recommendation(workload.containers.get(name="app"))

    data = (
        client_for(viewer).get(f"/api/v1/workloads/{workload.pk}/recommendation").json()
    )

    assert data["hpaAdjustments"] == []


def test_the_workload_page_shows_the_hpa_change_and_why_actuation_leaves_cpu(
    viewer, scaled
):
    page = client_for(viewer).get(reverse("workload", args=[scaled.pk])).content
    text = page.decode()

    assert 'data-testid="hpa-adjustments"' in text
    assert "averageUtilization 140 %" in text
    assert "never change a resource an HPA scales on" in text


def test_rightsize_moves_the_hpa_target_of_the_workload_it_sizes(viewer, scaled):
    response = client_for(viewer).post(
        "/api/v1/rightsize", MANIFESTS, content_type="application/yaml"
    )

    assert response.status_code == 200, response.content
    data = response.json()
    deployment, hpa, other = data["manifests"]
    app = deployment["spec"]["template"]["spec"]["containers"][0]
    assert app["resources"]["requests"]["cpu"] == "250m"
    metrics = hpa["spec"]["metrics"]
    assert metrics[0]["resource"]["target"] == ADJUSTED
    # An AverageValue target does not depend on the request: left as it is.
    assert metrics[1]["containerResource"]["target"] == {
        "type": "AverageValue",
        "averageValue": "400Mi",
    }
    # The HPA of a workload not in the manifests is passed on untouched.
    assert other["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 60
    report = {
        d["name"]: d
        for d in data["documents"]
        if d["kind"] == "HorizontalPodAutoscaler"
    }
    assert report["web"]["status"] == "rightsized"
    assert "scales at the same usage per pod" in report["web"]["reason"]
    (change,) = report["web"]["hpa_changes"]
    assert change["field"] == "spec.metrics[0].target"
    assert change["after"] == ADJUSTED
    assert report["other"]["status"] == "unchanged"
    assert report["other"]["hpa_changes"] == []


def test_rightsize_names_the_field_of_a_malformed_hpa_target(viewer, scaled):
    broken = MANIFESTS.replace("averageValue: 400Mi", "averageValue: plenty")

    response = client_for(viewer).post(
        "/api/v1/rightsize", broken, content_type="application/yaml"
    )

    assert response.status_code == 400
    error = response.json()["error"]
    assert "documents[1].spec.metrics" in error["fields"]
    assert "spec.metrics[1].containerResource.target.averageValue" in error["message"]


def test_recommendation_query_returns_the_hpa_change(viewer, scaled):
    pod = yaml.safe_load(MANIFESTS.split("---")[0])["spec"]["template"]
    query = {
        "metadata": {"namespace": "shop"},
        "spec": {"pod": pod, "owner": {"kind": "Deployment", "name": "web"}},
    }

    response = client_for(viewer).post(
        "/api/v1/recommendation-query", query, content_type="application/json"
    )

    assert response.status_code == 200, response.content
    (change,) = response.json()["status"]["hpaAdjustments"]
    assert change["hpa"] == "web"
    assert change["after"] == ADJUSTED


# --- actuation: upstream's rule -------------------------------------------------------


def test_the_webhook_leaves_the_resource_an_hpa_scales_on(scaled):
    inputs = inputs_for_workload(scaled)
    entry = WorkloadEntry.of(scaled, scaled.policy)
    entry = type(entry)(**{**entry.__dict__, "inputs": inputs})
    container = PodContainerRef(
        list_key="containers",
        index=0,
        name="app",
        requests=Resources(500, 512 * MIB),
        limits=Resources(1000, 1024 * MIB),
        raw={},
    )

    (plan,) = advise_containers(entry=entry, containers=[container])

    # Memory follows the recommendation; cpu stays as submitted, and says why.
    assert plan.set_requests.cpu_millicores is None
    assert plan.set_requests.memory_bytes == 300 * MIB
    assert "an HPA scales this workload on cpu" in plan.reason
    # The advice for /rightsize and the dashboard still recommends cpu.
    full = advise(inputs, workload_pod(list(scaled.containers.all())))
    assert full.containers[0].target.cpu_millicores == 250


def test_the_webhook_says_left_as_is_once_when_an_hpa_scales_on_every_resource(
    scaled,
):
    memory = {**CPU_HPA[0]["metrics"][0], "resource": "memory"}
    both = [
        {
            **CPU_HPA[0],
            "resources": ["cpu", "memory"],
            "metrics": [CPU_HPA[0]["metrics"][0], memory],
        }
    ]
    Workload.objects.filter(pk=scaled.pk).update(hpa_conflicts=both)
    scaled.refresh_from_db()
    inputs = inputs_for_workload(scaled)
    entry = WorkloadEntry.of(scaled, scaled.policy)
    entry = type(entry)(**{**entry.__dict__, "inputs": inputs})
    container = PodContainerRef(
        list_key="containers",
        index=0,
        name="app",
        requests=Resources(500, 512 * MIB),
        limits=Resources(1000, 1024 * MIB),
        raw={},
    )

    (plan,) = advise_containers(entry=entry, containers=[container])

    assert plan.set_requests == Resources()
    assert plan.reason.startswith("left as is: an HPA scales this workload on cpu")
    assert plan.reason.count("left as is") == 1, plan.reason


def test_the_updater_proposes_no_change_to_a_resource_an_hpa_scales_on(scaled):
    rec = scaled.containers.get(name="app").latest_recommendation
    pod = PodInfo(
        namespace="shop",
        name="web-abc-12345",
        phase="Running",
        containers=(
            ContainerSpec("app", "regular", Resources(500, 512 * MIB), Resources()),
        ),
    )

    held, _ = capped_recommendations(pod, {"app": rec}, [], (None, None), CPU_HPA)
    free, _ = capped_recommendations(pod, {"app": rec}, [], (None, None))

    assert held["app"].target == Resources(None, 300 * MIB)
    assert free["app"].target == Resources(250, 300 * MIB)


def test_rightsize_as_yaml_notes_the_hpa_change_and_why(viewer, scaled):
    response = client_for(viewer).post(
        "/api/v1/rightsize?format=yaml", MANIFESTS, content_type="application/yaml"
    )

    assert response.status_code == 200, response.content
    text = response.content.decode()
    assert (
        "# HorizontalPodAutoscaler/web spec.metrics[0].target: averageUtilization 70 "
        "-> averageUtilization 140 (cpu request of the pod 500m -> 250m:" in text
    )
    documents = list(yaml.safe_load_all(text))
    assert documents[1]["spec"]["metrics"][0]["resource"]["target"] == ADJUSTED


def test_the_workload_page_warns_of_a_trigger_above_the_new_limit(viewer, scaled):
    # 150 % of 500m is 750m per pod; the recommendation's cpu limit is 500m.
    conflicts = [
        {
            **CPU_HPA[0],
            "metrics": [{**CPU_HPA[0]["metrics"][0], "average_utilization": 150}],
        }
    ]
    Workload.objects.filter(pk=scaled.pk).update(hpa_conflicts=conflicts)

    text = client_for(viewer).get(reverse("workload", args=[scaled.pk])).content
    warnings = [
        line
        for line in text.decode().splitlines()
        if 'data-testid="hpa-warning"' in line
    ]

    assert len(warnings) == 1
    assert (
        "(cpu averageUtilization 300) scales out at 750m per pod, above the cpu "
        in (warnings[0])
    )
    assert "limit of the pod (500m)" in warnings[0]
