"""POST /api/v1/rightsize?output=kustomize|helm|diff: the change in the form the
repository keeps, each checked by a round trip to the rendered manifests (the real
``kubectl kustomize``, ``helm template`` and ``git apply``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client

from recommender.models import StaticCoefficient, Workload
from tests.conftest import service_missing
from tests.helm_binary import helm_template

pytestmark = pytest.mark.django_db

BASE = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      initContainers:
      - {name: migrate, image: shop/migrate}
      - name: proxy
        image: envoy
        restartPolicy: Always
        resources:
          requests: {cpu: 200m, memory: 128Mi}
      containers:
      - name: app
        image: shop/web:1.4
        resources:
          requests: {cpu: "1", memory: 1Gi}
          limits: {cpu: "2", memory: 2Gi}
      - name: sidecar
        image: shop/log
        resources:
          requests: {cpu: 100m, memory: 64Mi}
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: report
  namespace: shop
spec:
  schedule: "0 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: job
            image: shop/report
            resources:
              requests:
                cpu: '500m'
                memory: "256Mi"
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {a: "1"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - name: api
        image: shop/api
        resources:
          requests: {cpu: 400m}
"""


@pytest.fixture
def coefficient(db: Any) -> None:
    # Unknown workloads and containers without a recommendation: half their requests.
    StaticCoefficient.objects.create(namespace="", cpu_factor=0.5, memory_factor=0.5)


def _post(client: Client, query: str, body: str = BASE) -> dict[str, Any]:
    response = client.post(
        f"/api/v1/rightsize?{query}", body, content_type="application/yaml"
    )
    assert response.status_code == 200, response.content
    return response.json()


def _canonical(documents: list[Any]) -> list[str]:
    return sorted(json.dumps(d, sort_keys=True) for d in documents if d is not None)


def test_kustomize_over_the_base_and_the_patch_set_renders_the_rightsized_manifests(
    read_client: Client, shop: Workload, coefficient: None, tmp_path: Path
) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        service_missing("kubectl (for kubectl kustomize)")
    answer = _post(read_client, "output=kustomize")
    assert answer["summary"]["rightsized"] == 3
    patch_set = answer["patches"]
    assert sorted(patch_set["files"]) == [
        "patches/cronjob-shop-report.yaml",
        "patches/deployment-shop-api.yaml",
        "patches/deployment-shop-web.yaml",
    ]
    web = yaml.safe_load(patch_set["files"]["patches/deployment-shop-web.yaml"])
    spec = web["spec"]["template"]["spec"]
    # Only what changes: the native sidecar under initContainers, by name.
    assert spec["initContainers"][0] == {"name": "migrate"}  # order kept
    assert spec["initContainers"][1]["name"] == "proxy"
    assert [c["name"] for c in spec["containers"]] == ["app", "sidecar"]
    assert set(spec["containers"][0]) == {"name", "resources"}

    (tmp_path / "manifests.yaml").write_text(BASE)
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
    assert _canonical(list(yaml.safe_load_all(rendered))) == _canonical(
        answer["manifests"]
    )
    # Without the patches, kustomize renders the base: the patches did the work.
    assert _canonical(list(yaml.safe_load_all(rendered))) != _canonical(
        list(yaml.safe_load_all(BASE))
    )


# The shop's manifests as a chart keeps them: BASE with each container's resources, the
# web's image tag and the cron schedule taken from values.
SHOP_CHART_TEMPLATE = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      initContainers:
      - {name: migrate, image: shop/migrate}
      - name: proxy
        image: envoy
        restartPolicy: Always
        resources: {{- toYaml .Values.web.proxy.resources | nindent 10 }}
      containers:
      - name: app
        image: shop/web:{{ .Values.web.app.image.tag }}
        resources: {{- toYaml .Values.web.app.resources | nindent 10 }}
      - name: sidecar
        image: shop/log
        resources: {{- toYaml .Values.web.sidecar.resources | nindent 10 }}
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: report
  namespace: shop
spec:
  schedule: {{ .Values.report.schedule | quote }}
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: job
            image: shop/report
            resources: {{- toYaml .Values.report.job.resources | nindent 14 }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {a: "1"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - name: api
        image: shop/api
        resources: {{- toYaml .Values.api.api.resources | nindent 10 }}
"""
SHOP_CHART_VALUES = {
    "web": {
        "app": {
            "image": {"tag": "1.4"},
            "resources": {
                "requests": {"cpu": "1", "memory": "1Gi"},
                "limits": {"cpu": "2", "memory": "2Gi"},
            },
        },
        "sidecar": {"resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
        "proxy": {"resources": {"requests": {"cpu": "200m", "memory": "128Mi"}}},
    },
    "report": {
        "schedule": "0 * * * *",
        "job": {"resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}},
    },
    "api": {"api": {"resources": {"requests": {"cpu": "400m"}}}},
}


def test_helm_template_with_the_values_fragment_renders_the_rightsized_manifests(
    read_client: Client, shop: Workload, coefficient: None, tmp_path: Path
) -> None:
    answer = _post(
        read_client, "output=helm&values_path={workload}.{container}.resources"
    )
    assert yaml.safe_load(answer["values_yaml"]) == answer["values"]
    chart = tmp_path / "shop"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: shop\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text(yaml.safe_dump(SHOP_CHART_VALUES))
    (chart / "templates" / "shop.yaml").write_text(SHOP_CHART_TEMPLATE)
    # The chart as it is renders the posted manifests ...
    assert _canonical(helm_template(chart)) == _canonical(
        list(yaml.safe_load_all(BASE))
    )
    # ... and with the fragment after the chart's values (`helm upgrade -f`), Helm's
    # own merge gives the right-sized ones: the requests replaced, the rest kept.
    (tmp_path / "rightsized.yaml").write_text(answer["values_yaml"])
    rendered = helm_template(chart, tmp_path / "rightsized.yaml")
    assert _canonical(rendered) == _canonical(answer["manifests"])
    web = next(m for m in rendered if m["metadata"]["name"] == "web")
    app = web["spec"]["template"]["spec"]["containers"][0]
    assert app["image"] == "shop/web:1.4"
    assert app["resources"]["requests"]["cpu"] != "1"


def test_one_values_path_for_several_containers_is_refused_naming_it(
    read_client: Client, shop: Workload, coefficient: None
) -> None:
    response = read_client.post(
        "/api/v1/rightsize?output=helm&values_path=server.resources",
        BASE,
        content_type="application/yaml",
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert list(error["fields"]) == ["values_path"]
    assert "put {container} or {workload} in the path" in error["message"]
    single = _post(
        read_client, "output=helm&values_path=server.resources", BASE.split("---")[1]
    )
    assert set(single["values"]) == {"server"}
    assert set(single["values"]["server"]["resources"]) == {"requests"}


def test_the_diff_applies_to_the_posted_file_and_gives_the_rightsized_manifests(
    read_client: Client, shop: Workload, coefficient: None, tmp_path: Path
) -> None:
    git = shutil.which("git")
    if git is None:
        service_missing("git (for git apply)")
    answer = _post(read_client, "output=diff&diff_path=k8s/app.yaml")
    diff = answer["diff"]
    assert diff.startswith("--- a/k8s/app.yaml\n+++ b/k8s/app.yaml\n")
    removed = [
        line
        for line in diff.splitlines()
        if line.startswith("-") and not line.startswith("---")
    ]
    # The CronJob's quoted values are replaced where they stand, quotes kept.
    assert "-                cpu: '500m'" in removed
    assert '+                memory: "128Mi"' in diff
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "app.yaml").write_text(BASE)
    (tmp_path / "change.diff").write_text(diff)
    subprocess.run(
        [git, "apply", "--unsafe-paths", "change.diff"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=60,
    )
    patched = (tmp_path / "k8s" / "app.yaml").read_text()
    assert _canonical(list(yaml.safe_load_all(patched))) == _canonical(
        answer["manifests"]
    )
    # Lines that change nothing are only context (web's values replaced in place).
    assert not [
        line for line in removed if "image: shop/" in line and "api" not in line
    ]
    assert '-          requests: {cpu: "1", memory: 1Gi}' in removed


def test_a_json_body_is_diffed_as_json(read_client: Client, shop: Workload) -> None:
    document = yaml.safe_load(BASE.split("---")[0])
    body = json.dumps(document, indent=2)
    response = read_client.post(
        "/api/v1/rightsize?output=diff", body, content_type="application/json"
    )
    diff = response.json()["diff"]
    patched = _apply(body, diff)
    assert json.loads(patched) == response.json()["manifests"][0]


def _apply(text: str, diff: str) -> str:
    """Apply a unified diff of one file to its text (hunks in order)."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    position = 0
    hunks = diff.split("\n@@ ")[1:]
    for hunk in hunks:
        header, _, body = hunk.partition("\n")
        start = int(header.split(" ")[0].lstrip("-").split(",")[0]) - 1
        out.extend(lines[position:start])
        position = start
        for line in body.splitlines(keepends=True):
            if line.startswith(("-", " ")):
                position += 1
            if line.startswith(("+", " ")):
                out.append(line[1:])
    out.extend(lines[position:])
    return "".join(out)


def test_yaml_answers_of_each_output(read_client: Client, shop: Workload) -> None:
    def as_yaml(query: str) -> str:
        response = read_client.post(
            f"/api/v1/rightsize?{query}&format=yaml",
            BASE.split("---")[0],
            content_type="application/yaml",
        )
        assert response.status_code == 200, response.content
        return response.content.decode()

    values = yaml.safe_load(as_yaml("output=helm&values_path={container}.resources"))
    assert set(values) == {"app"}
    kustomize = list(yaml.safe_load_all(as_yaml("output=kustomize")))
    assert kustomize[-1] == {"patches": [{"path": "patches/deployment-shop-web.yaml"}]}
    assert as_yaml("output=diff").startswith("--- a/manifests.yaml")
