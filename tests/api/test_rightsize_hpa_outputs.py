"""An HPA in every output form of rightsize: the kustomize patch set (rendered by the
real ``kubectl kustomize``), the Helm values (rendered by the real ``helm template`` of
a ``helm create`` chart), the diff (applied by the real
``git apply``) and ``manage.py rightsize`` carry the HPA change exactly as the
rendered manifests do; a trigger above the new limit is warned about, and every
quantity is in Kubernetes units."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.test import Client

from recommender.models import Workload
from tests.conftest import service_missing
from tests.factories import make_cluster, make_recommendation, make_workload
from tests.helm_binary import helm_template, run_helm

pytestmark = pytest.mark.django_db
MIB = 2**20
EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: shop/web:1.4
        resources:
          requests: {cpu: 500m, memory: 512Mi}
          limits: {cpu: "1", memory: 1Gi}
"""
HPA = """\
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
"""
BODY = DEPLOYMENT + HPA


@pytest.fixture
def web(db: Any) -> Workload:
    """shop/web: app requests 500m and 512Mi (limits 1 and 1Gi), recommended 250m
    and 300Mi with eight days of history."""
    workload = make_workload(make_cluster("prod"), "web", namespace="shop")
    make_recommendation(workload.containers.get(name="app"))
    return workload


def _post(client: Client, query: str, body: str = BODY) -> dict[str, Any]:
    response = client.post(
        f"/api/v1/rightsize?{query}", body, content_type="application/yaml"
    )
    assert response.status_code == 200, response.content
    return response.json()


def _canonical(documents: list[Any]) -> list[str]:
    return sorted(json.dumps(d, sort_keys=True) for d in documents if d is not None)


def _hpa(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    (hpa,) = [m for m in manifests if m["kind"] == "HorizontalPodAutoscaler"]
    return hpa


def test_the_manifests_move_the_hpa_target_the_other_forms_are_checked_against(
    read_client: Client, web: Workload
) -> None:
    metrics = _hpa(_post(read_client, "output=manifests")["manifests"])["spec"][
        "metrics"
    ]
    # 70 % of 500m = 350m per pod; at 250m the same trigger is 140 %.
    assert metrics[0]["resource"]["target"] == {
        "type": "Utilization",
        "averageUtilization": 140,
    }
    assert metrics[1]["containerResource"]["target"]["averageValue"] == "400Mi"


def test_kustomize_over_the_base_renders_the_hpa_change_with_real_kubectl(
    read_client: Client, web: Workload, tmp_path: Path
) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        service_missing("kubectl (for kubectl kustomize)")
    answer = _post(read_client, "output=kustomize")
    patch_set = answer["patches"]
    assert sorted(patch_set["files"]) == [
        "patches/deployment-shop-web.yaml",
        "patches/horizontalpodautoscaler-shop-web.yaml",
    ]
    patch = yaml.safe_load(
        patch_set["files"]["patches/horizontalpodautoscaler-shop-web.yaml"]
    )
    # The whole metrics list: a strategic merge replaces it (k8s-wire hpa/18).
    assert len(patch["spec"]["metrics"]) == 2
    (tmp_path / "manifests.yaml").write_text(BODY)
    fragment = yaml.safe_load(patch_set["kustomization"])
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": ["manifests.yaml"], **fragment})
    )
    for name, text in patch_set["files"].items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    rendered = subprocess.run(
        [kubectl, "kustomize", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    documents = list(yaml.safe_load_all(rendered))
    assert _canonical(documents) == _canonical(answer["manifests"])
    assert _hpa(documents)["spec"]["metrics"][0]["resource"]["target"] == {
        "type": "Utilization",
        "averageUtilization": 140,
    }


def test_the_helm_values_carry_the_hpa_target_in_helm_creates_layout(
    read_client: Client, web: Workload
) -> None:
    answer = _post(read_client, "output=helm&values_path={container}.resources")
    assert answer["values"]["autoscaling"] == {"targetCPUUtilizationPercentage": 140}
    assert answer["values"]["app"]["resources"]["requests"] == {
        "cpu": "250m",
        "memory": "300Mi",
    }
    assert yaml.safe_load(answer["values_yaml"]) == answer["values"]
    # Per workload, where the chart keeps it.
    placed = _post(read_client, "output=helm&hpa_values_path={workload}.hpa")
    assert placed["values"]["web"]["hpa"] == {"targetCPUUtilizationPercentage": 140}


def test_helm_template_of_a_helm_create_chart_with_the_values_renders_the_change(
    read_client: Client, web: Workload, tmp_path: Path
) -> None:
    """The chart ``helm create`` scaffolds keeps the container's resources at
    ``resources`` and the HPA's cpu target at ``autoscaling``: the fragment for that
    layout, after the chart's values, makes Helm render the right-sized requests and
    the moved cpu trigger."""
    answer = _post(read_client, "output=helm")  # values_path: resources
    done = run_helm("create", str(tmp_path / "web"))
    assert done.returncode == 0, done.stderr
    (tmp_path / "ours.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": yaml.safe_load(DEPLOYMENT)["spec"]["template"]["spec"][
                    "containers"
                ][0]["resources"],
                "autoscaling": {
                    "enabled": True,
                    "minReplicas": 2,
                    "maxReplicas": 10,
                    "targetCPUUtilizationPercentage": 70,
                },
            }
        )
    )
    (tmp_path / "rightsized.yaml").write_text(answer["values_yaml"])

    def rendered(*values: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        objects = helm_template(tmp_path / "web", *values, release="web")
        (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        return container["resources"], _hpa(objects)["spec"]["metrics"][0]

    before = rendered(tmp_path / "ours.yaml")
    assert before[1]["resource"]["target"]["averageUtilization"] == 70
    resources, cpu_metric = rendered(
        tmp_path / "ours.yaml", tmp_path / "rightsized.yaml"
    )
    ((app,),) = [
        m["spec"]["template"]["spec"]["containers"]
        for m in answer["manifests"]
        if m["kind"] == "Deployment"
    ]
    assert resources == app["resources"] != before[0]
    assert cpu_metric == _hpa(answer["manifests"])["spec"]["metrics"][0]
    assert cpu_metric["resource"]["target"]["averageUtilization"] == 140


def test_a_change_helm_creates_keys_cannot_say_gives_the_whole_metrics_list(
    read_client: Client, web: Workload
) -> None:
    # A ContainerResource Utilization target has no key in helm create's values.
    body = BODY.replace(
        "target: {type: AverageValue, averageValue: 400Mi}",
        "target: {type: Utilization, averageUtilization: 80}",
    )
    answer = _post(read_client, "output=helm", body)
    metrics = answer["values"]["autoscaling"]["metrics"]
    assert metrics == _hpa(answer["manifests"])["spec"]["metrics"]
    assert metrics[1]["containerResource"]["target"]["averageUtilization"] == 137


def test_the_diff_carries_the_hpa_change_and_git_apply_gives_the_manifests(
    read_client: Client, web: Workload, tmp_path: Path
) -> None:
    git = shutil.which("git")
    if git is None:
        service_missing("git (for git apply)")
    answer = _post(read_client, "output=diff&diff_path=k8s/web.yaml")
    diff = answer["diff"]
    assert "-      target: {type: Utilization, averageUtilization: 70}" in diff
    assert "+      target: {type: Utilization, averageUtilization: 140}" in diff
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "web.yaml").write_text(BODY)
    (tmp_path / "change.diff").write_text(answer["diff"])
    subprocess.run(
        [git, "apply", "--unsafe-paths", "change.diff"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=60,
    )
    patched = list(yaml.safe_load_all((tmp_path / "k8s" / "web.yaml").read_text()))
    assert _canonical(patched) == _canonical(answer["manifests"])


def test_a_target_that_changes_type_rewrites_its_document_in_the_diff(
    read_client: Client, web: Workload, tmp_path: Path
) -> None:
    git = shutil.which("git")
    if git is None:
        service_missing("git (for git apply)")
    # 3 % of 500m is 15m; at 275m (250m x 1.1) that is 5.45 %, which 5 % misses
    # by 8 %: the same trigger as an AverageValue.
    body = BODY.replace("averageUtilization: 70", "averageUtilization: 3")
    answer = _post(read_client, "output=diff&multiplier=1.1", body)
    target = _hpa(answer["manifests"])["spec"]["metrics"][0]["resource"]["target"]
    assert target == {"type": "AverageValue", "averageValue": "15m"}
    (tmp_path / "manifests.yaml").write_text(body)
    (tmp_path / "change.diff").write_text(answer["diff"])
    subprocess.run(
        [git, "apply", "change.diff"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=60,
    )
    patched = list(yaml.safe_load_all((tmp_path / "manifests.yaml").read_text()))
    assert _canonical(patched) == _canonical(answer["manifests"])


def test_a_trigger_above_the_new_limit_is_warned_in_kubernetes_units(
    read_client: Client, web: Workload
) -> None:
    # 150 % of 500m is 750m per pod: above the new cpu limit (500m at 250m).
    # 80 % of 512Mi is 409.6Mi: memory reads in Mi, never in raw bytes.
    body = BODY.replace("averageUtilization: 70", "averageUtilization: 150").replace(
        "target: {type: AverageValue, averageValue: 400Mi}",
        "target: {type: AverageValue, averageValue: 900Mi}",
    )
    answer = _post(read_client, "output=manifests", body)
    (hpa,) = [d for d in answer["documents"] if d["kind"] == "HorizontalPodAutoscaler"]
    cpu, memory = hpa["warnings"]
    assert cpu.startswith(
        "HPA web: spec.metrics[0] (cpu averageUtilization 300) scales out at 750m "
        "per pod, above the cpu limit of the pod (500m)"
    ), cpu
    assert "never scales out on cpu" in cpu
    assert memory.startswith(
        "HPA web: spec.metrics[1] (memory averageValue 900Mi) scales out at 900Mi "
        "per pod, above the memory limit of container app (600Mi)"
    ), memory
    text = read_client.post(
        "/api/v1/rightsize?format=yaml", body, content_type="application/yaml"
    ).content.decode()
    assert f"# WARNING: {cpu}" in text
    # Within the limits: no warning.
    fine = _post(read_client, "output=manifests")
    (hpa,) = [d for d in fine["documents"] if d["kind"] == "HorizontalPodAutoscaler"]
    assert hpa["warnings"] == []


def test_a_memory_utilization_reason_speaks_kubernetes_units(
    read_client: Client, web: Workload
) -> None:
    body = BODY.replace(
        "target: {type: AverageValue, averageValue: 400Mi}",
        "target: {type: Utilization, averageUtilization: 80}",
    )
    answer = _post(read_client, "output=manifests", body)
    (hpa,) = [d for d in answer["documents"] if d["kind"] == "HorizontalPodAutoscaler"]
    memory = hpa["hpa_changes"][1]
    # 80 % of 512Mi = 429496729.6 bytes per pod, said as a quantity.
    assert "keeps the HPA scaling out at 410Mi per pod" in memory["reason"]
    assert "429496" not in json.dumps(answer)


def _command(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "rightsize",
        str(EXAMPLES / "shop-web-hpa.yaml"),
        "--samples",
        str(EXAMPLES / "usage.csv"),
        *args,
        stdout=out,
        stderr=err,
    )
    return out.getvalue(), err.getvalue()


def test_manage_py_rightsize_carries_the_hpa_change_in_every_output(
    tmp_path: Path,
) -> None:
    manifests, err = _command()
    hpa = _hpa([d for d in yaml.safe_load_all(manifests) if d])
    target = hpa["spec"]["metrics"][0]["resource"]["target"]
    assert target["averageUtilization"] != 60
    # The example's triggers sit above the right-sized limits: said on stderr.
    assert err.count("warning: HPA web: spec.metrics[") == 2
    documents = list(yaml.safe_load_all(_command("--output", "kustomize")[0]))
    (patch,) = [d for d in documents if d.get("kind") == "HorizontalPodAutoscaler"]
    assert patch["spec"]["metrics"] == hpa["spec"]["metrics"]
    values = yaml.safe_load(_command("--output", "helm")[0])
    assert values["autoscaling"] == {
        "targetCPUUtilizationPercentage": target["averageUtilization"]
    }
    diff, _ = _command("--output", "diff")
    assert f"+          averageUtilization: {target['averageUtilization']}" in diff
