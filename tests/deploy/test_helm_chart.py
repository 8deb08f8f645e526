"""deploy/helm/vpaweb, checked with the real helm (tests/helm_binary.py): `helm lint
--strict`, and `helm template` with each documented values file equal, as a set of
objects, to `kubectl kustomize` of the overlay it stands for. Two differences are
normalized, both kustomize's: its overlays render the Namespace (the chart leaves it to
`helm install --create-namespace` unless `createNamespace` is on), and its base's
`app.kubernetes.io/part-of` label reaches only the base's objects (the chart puts it on
every object). Secret data is compared decoded (kustomize wraps long base64 lines)."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.deploy.test_manifests import OVERLAYS, render
from tests.helm_binary import VERSION, helm, run_helm

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "vpaweb"
EXAMPLES = CHART / "examples"
# Each overlay's values files, as the chart's README lists them.
VALUES_FILES = {
    "production": ["production.yaml"],
    "actuation": ["production.yaml", "actuation.yaml"],
    "actuation-cert-manager": ["production.yaml", "actuation-cert-manager.yaml"],
    "trial": ["trial.yaml"],
}
PART_OF = "app.kubernetes.io/part-of"


def template(*args: str) -> list[dict]:
    done = run_helm("template", "vpaweb", str(CHART), "--namespace", "vpaweb", *args)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def values_args(overlay: str) -> list[str]:
    files = [EXAMPLES / name for name in VALUES_FILES[overlay]]
    return [arg for path in files for arg in ("-f", str(path))]


def normalized(objects) -> dict[tuple[str, str], dict]:
    """Objects by (kind, name), with the two kustomize differences of the docstring."""
    by_key = {}
    for obj in objects:
        if obj["kind"] == "Namespace":
            continue
        obj = yaml.safe_load(yaml.safe_dump(obj))  # a copy: render() is cached
        obj["metadata"].setdefault("labels", {})[PART_OF] = "vpaweb"
        if obj["kind"] == "Secret":
            obj["data"] = {
                k: base64.b64decode(v).decode() for k, v in obj["data"].items()
            }
        by_key[obj["kind"], obj["metadata"]["name"]] = obj
    return by_key


def test_make_test_installs_the_pinned_helm_before_running_the_suite():
    makefile = (ROOT / "Makefile").read_text()
    for target in ("test", "test-sqlite", "test-pg"):
        assert re.search(rf"^{target}: .*\$\(HELM\)", makefile, re.M), target
    script = (ROOT / "tools" / "install-helm.sh").read_text()
    assert re.search(r'^TARBALL_SHA256="[0-9a-f]{64}"$', script, re.M)
    assert f'HELM_VERSION="{VERSION}"' in script
    assert helm()
    assert run_helm("version", "--template", "{{.Version}}").stdout == VERSION


def test_every_overlay_has_a_documented_values_file():
    assert sorted(VALUES_FILES) == OVERLAYS
    readme = (CHART / "README.md").read_text()
    for overlay, files in VALUES_FILES.items():
        listed = ", ".join(f"`examples/{name}`" for name in files)
        assert f"| `{overlay}` | {listed} |" in readme


@pytest.mark.parametrize("overlay", [None, *sorted(VALUES_FILES)])
def test_helm_lint_strict_passes(overlay):
    args = values_args(overlay) if overlay else []
    done = run_helm("lint", "--strict", str(CHART), *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout


@pytest.mark.parametrize("overlay", sorted(VALUES_FILES))
def test_helm_template_equals_the_kustomize_overlay(overlay):
    chart = normalized(template(*values_args(overlay)))
    kustomize = normalized(render(overlay))
    assert sorted(chart) == sorted(kustomize)
    for key, obj in kustomize.items():
        assert chart[key] == obj, key


def test_the_webhook_narrowing_values_equal_their_kustomize_components(tmp_path):
    """webhook.clientCA and webhook.controlPlaneCIDR against the components
    webhook-client-ca and webhook-from-control-plane on the actuation overlay."""
    deploy = os.path.relpath(ROOT / "deploy", tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        f"""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [{deploy}/overlays/actuation]
components:
  - {deploy}/components/webhook-client-ca
  - {deploy}/components/webhook-from-control-plane
patches:
  - target: {{kind: NetworkPolicy, name: vpaweb-webhook}}
    patch: |-
      - op: replace
        path: /spec/ingress/0/from/0/ipBlock/cidr
        value: 10.0.0.0/28
"""
    )
    render("production")  # reports a missing kubectl
    done = subprocess.run(
        ["kubectl", "kustomize", str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    kustomize = normalized(d for d in yaml.safe_load_all(done.stdout) if d)
    chart = normalized(
        template(
            *values_args("actuation"),
            "--set",
            "webhook.clientCA=true,webhook.controlPlaneCIDR=10.0.0.0/28",
        )
    )
    assert chart == kustomize


@pytest.mark.parametrize("version", ["1.36.0", "1.37.0"])
def test_every_object_of_every_option_validates_against_the_kubernetes_schema(version):
    objects = template(
        "--set",
        "createNamespace=true,actuation.enabled=true,webhook.enabled=true,"
        "webhook.clientCA=true,webhook.controlPlaneCIDR=10.0.0.0/28,"
        "postgresql.enabled=true,redis.enabled=true,secrets.create=true,"
        "secrets.data.SECRET_KEY=x,image.pullPolicy=IfNotPresent",
    )
    assert {o["kind"] for o in objects} >= {"Namespace", "Secret", "StatefulSet", "Job"}
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize(
    ("values", "refusal"),
    [
        ("web.replica=3", "additional properties 'replica' not allowed"),
        ("webhook.tls=openssl", "value must be one of 'self-signed', 'cert-manager'"),
        ("webhook.enabled=true", "webhook.enabled needs actuation.enabled"),
    ],
)
def test_the_chart_refuses_values_it_cannot_honour(values, refusal):
    done = run_helm("template", "vpaweb", str(CHART), "--set", values)
    assert done.returncode != 0
    assert refusal in done.stderr


def test_notes_say_how_to_log_in():
    done = run_helm(
        "install", "vpaweb", str(CHART), "--dry-run=client", "-n", "vpaweb",
        *values_args("trial"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    notes = done.stdout.split("NOTES:", 1)[1]
    assert "kubectl -n vpaweb port-forward svc/vpaweb-web 8000:80" in notes
    assert "cat /var/lib/vpaweb/demo-admin-password.txt" in notes


def test_the_readme_values_table_is_current():
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "helm_values_table.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout


def test_every_value_is_documented():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from helm_values_table import documented_keys
    finally:
        sys.path.pop(0)
    text = (CHART / "values.yaml").read_text()
    documented = {path for path, _ in documented_keys(text)}

    def undocumented(node, prefix=""):
        for key, value in node.items():
            path = f"{prefix}{key}"
            if path in documented:
                continue
            if isinstance(value, dict) and value:
                yield from undocumented(value, f"{path}.")
            else:
                yield path

    assert list(undocumented(yaml.safe_load(text))) == []
