"""POST /api/v1/check and manage.py check-manifests: the drift check for pipelines,
and the curl-only pipeline example of the docs, run against a live server."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
import yaml
from django.core.management import CommandError, call_command
from django.test import Client

from recommender.models import Workload
from tests.conftest import service_missing

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "examples" / "ci" / "vpaweb-check.sh"

WEB = """\
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
          requests: {cpu: "1", memory: 1Gi}
      - name: sidecar
        resources:
          requests: {cpu: 100m, memory: 64Mi}
"""


def _check(client: Client, body: str = WEB, query: str = "") -> Any:
    return client.post(f"/api/v1/check?{query}", body, content_type="application/yaml")


@pytest.mark.django_db
def test_drift_is_named_per_container_and_resource(
    read_client: Client, shop: Workload
) -> None:
    response = _check(read_client)
    assert response.status_code == 200, response.content
    assert response["Vpaweb-Exit-Code"] == "1"
    check = response.json()
    assert (check["verdict"], check["exit_code"]) == ("drift", 1)
    assert check["summary"] == {"containers": 3, "ok": 0, "drift": 1, "unchecked": 2}
    verdicts = {c["container"]: c for c in check["containers"]}
    assert verdicts["sidecar"]["verdict"] == "unchecked"  # no recommendation yet
    assert verdicts["migrate"]["verdict"] == "unchecked"  # init containers: not sized
    app = verdicts["app"]
    assert app["verdict"] == "drift"
    cpu, memory = app["resources"]
    assert cpu == {
        "resource": "cpu",
        "posted": "1",
        "recommended": "587m",
        "allowed_difference": "117m",  # 20 % of 587m, above the 50m floor
        "difference_percent": 70.4,
        "change_percent": -41.3,
        "verdict": "drift",
        "message": "cpu request 1 is 413m above the recommended 587m (allowed: 117m)",
    }
    assert memory["recommended"] == "250Mi" and memory["verdict"] == "drift"
    assert check["tolerance"] == {
        "cpu_percent": 20,
        "memory_percent": 20,
        "cpu_floor": "50m",
        "memory_floor": "64Mi",
    }


@pytest.mark.django_db
def test_the_tolerance_is_configurable_per_request(
    read_client: Client, shop: Workload
) -> None:
    loose = _check(read_client, query="cpu_percent=80&memory_floor=800Mi").json()
    assert loose["verdict"] == "ok"
    assert [c["verdict"] for c in loose["containers"] if c["container"] == "app"] == [
        "ok"
    ]
    # A floor larger than the difference is enough on its own.
    floors = _check(read_client, query="cpu_floor=500m&memory_floor=1Gi").json()
    assert floors["verdict"] == "ok"
    bad = _check(read_client, query="cpu_floor=lots")
    assert bad.status_code == 400
    assert list(bad.json()["error"]["fields"]) == ["cpu_floor"]
    assert _check(read_client, query="cpu_precent=5").status_code == 400


@pytest.mark.django_db
def test_a_missing_request_is_drift_and_a_rightsized_manifest_passes(
    read_client: Client, shop: Workload
) -> None:
    missing = WEB.replace('requests: {cpu: "1", memory: 1Gi}', 'requests: {cpu: "1"}')
    check = _check(read_client, missing).json()
    app = next(c for c in check["containers"] if c["container"] == "app")
    memory = next(r for r in app["resources"] if r["resource"] == "memory")
    assert memory["posted"] is None and memory["verdict"] == "drift"
    assert memory["message"] == "no memory request; 250Mi is recommended"
    fixed = read_client.post(
        "/api/v1/rightsize?format=yaml", WEB, content_type="application/yaml"
    ).content.decode()
    response = _check(read_client, fixed)
    assert response.json()["verdict"] == "ok"
    assert response["Vpaweb-Exit-Code"] == "0"


@pytest.mark.django_db
def test_junit_xml_lists_every_container(read_client: Client, shop: Workload) -> None:
    response = read_client.post(
        "/api/v1/check",
        WEB,
        content_type="application/yaml",
        HTTP_ACCEPT="application/xml",
    )
    assert response["Content-Type"].startswith("application/xml")
    suite = ET.fromstring(response.content).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == (
        "3",
        "1",
        "2",
    )
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["app"].get("classname") == "shop/Deployment/web"
    failure = cases["app"].find("failure")
    assert failure is not None and "413m above the recommended 587m" in failure.get(
        "message", ""
    )
    assert cases["sidecar"].find("skipped") is not None
    # Errors stay JSON in the one error shape, whatever was asked for.
    refused = read_client.post(
        "/api/v1/check?format=junit", "kind: [", content_type="application/yaml"
    )
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "malformed"


def _script(live_url: str, key: str, manifests: Path, tmp_path: Path) -> Any:
    return subprocess.run(
        ["sh", str(SCRIPT), str(manifests)],
        cwd=tmp_path,
        env={
            "PATH": os.environ["PATH"],
            "VPAWEB_URL": live_url,
            "VPAWEB_TOKEN": key,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_pipeline_example_fails_on_drift_then_passes_once_fixed(
    transactional_db: Any,
    shop: Workload,
    read_key: str,
    live_server: Any,
    tmp_path: Path,
) -> None:
    if shutil.which("curl") is None or shutil.which("sh") is None:
        service_missing("curl and sh (the pipeline example)")
    manifests = tmp_path / "rendered.yaml"
    manifests.write_text(WEB)

    drifted = _script(live_server.url, read_key, manifests, tmp_path)
    assert drifted.returncode == 1, drifted.stdout + drifted.stderr
    assert "  shop/Deployment/web app" in drifted.stdout
    report = ET.parse(tmp_path / "vpaweb-check.xml").getroot()
    failed = [
        case.get("name")
        for case in report.iter("testcase")
        if case.find("failure") is not None
    ]
    assert failed == ["app"]

    # The fix: what rightsize answers for the same file.
    fixed = Client(HTTP_AUTHORIZATION=f"Bearer {read_key}").post(
        "/api/v1/rightsize?format=yaml", WEB, content_type="application/yaml"
    )
    manifests.write_text(fixed.content.decode())
    passed = _script(live_server.url, read_key, manifests, tmp_path)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    report = ET.parse(tmp_path / "vpaweb-check.xml").getroot()
    assert not [c for c in report.iter("testcase") if c.find("failure") is not None]

    broken = _script(live_server.url, "vpaweb_wrong", manifests, tmp_path)
    assert broken.returncode == 2
    assert "authentication_failed" in broken.stdout


def _run_check(*args: str) -> str:
    out = io.StringIO()
    call_command(
        "check-manifests",
        *args,
        "--samples",
        str(ROOT / "docs" / "examples" / "usage.csv"),
        stdout=out,
        stderr=io.StringIO(),
    )
    return out.getvalue()


def test_check_manifests_offline_exit_codes_and_junit(tmp_path: Path) -> None:
    example = ROOT / "docs" / "examples" / "shop-web.yaml"
    report = tmp_path / "report.xml"
    with pytest.raises(SystemExit) as drift:
        _run_check(str(example), "--junit-xml", str(report))
    assert drift.value.code == 1
    cases = list(ET.parse(report).getroot().iter("testcase"))
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("shop/Deployment/web", "app")
    ]
    out = io.StringIO()
    call_command(
        "rightsize",
        str(example),
        "--samples",
        str(ROOT / "docs" / "examples" / "usage.csv"),
        stdout=out,
        stderr=io.StringIO(),
    )
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(out.getvalue())
    assert yaml.safe_load(fixed.read_text())["kind"] == "Deployment"
    text = _run_check(str(fixed))  # no SystemExit: exit status 0
    assert text.splitlines()[-1] == "ok: 0 drift, 1 ok, 0 unchecked of 1 containers"
    with pytest.raises(CommandError) as error:
        _run_check(str(example), "--memory-floor", "much")
    assert error.value.returncode == 2
    assert str(error.value).startswith("--memory-floor: memory 'much'")
