"""`manage.py rightsize`: a manifests file right-sized from usage files, offline, in
each output form."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command

from tests.api.test_rightsize_outputs import _apply

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(
        "rightsize",
        *args,
        "--samples",
        str(EXAMPLES / "usage.csv"),
        stdout=out,
        stderr=io.StringIO(),
    )
    return out.getvalue()


def test_the_diff_applies_to_the_file_and_gives_the_rightsized_manifest(
    tmp_path: Path,
) -> None:
    (tmp_path / "app.yaml").write_text((EXAMPLES / "shop-web.yaml").read_text())
    manifests = run(str(tmp_path / "app.yaml"))
    diff = run(str(tmp_path / "app.yaml"), "--output", "diff")
    assert diff.startswith(f"--- a/{tmp_path / 'app.yaml'}\n")
    patched = _apply((tmp_path / "app.yaml").read_text(), diff)
    assert yaml.safe_load(patched) == yaml.safe_load(manifests)
    requests = yaml.safe_load(manifests)["spec"]["template"]["spec"]["containers"][0][
        "resources"
    ]["requests"]
    assert requests != {"cpu": "2", "memory": "2Gi"}


def test_kustomize_and_helm_outputs(tmp_path: Path) -> None:
    path = str(EXAMPLES / "shop-web.yaml")
    patch, kustomization = list(yaml.safe_load_all(run(path, "--output", "kustomize")))
    assert patch["metadata"] == {"name": "web", "namespace": "shop"}
    assert kustomization == {"patches": [{"path": "patches/deployment-shop-web.yaml"}]}
    values = yaml.safe_load(
        run(path, "--output", "helm", "--values-path", "web.resources")
    )
    manifest = yaml.safe_load(run(path))
    assert (
        values["web"]["resources"]
        == manifest["spec"]["template"]["spec"]["containers"][0]["resources"]
    )


def test_bad_input_is_a_clean_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"^--profile: unknown profile 'x'"):
        run(str(EXAMPLES / "shop-web.yaml"), "--profile", "x")
    with pytest.raises(CommandError, match=r"nothing\.yaml: cannot be read"):
        run(str(tmp_path / "nothing.yaml"))
