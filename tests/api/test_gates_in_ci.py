"""The CI path applies the history gate the webhook and the updater apply, and never
passes a check that checked nothing.

- rightsize, check, the namespace patch and the workload page's snippets leave a
  recommendation with too little history alone, saying why (``history.too_young``,
  ``VPAWEB_MIN_HISTORY_HOURS``), or give it flagged ``low_confidence`` when asked
  (``include_short_history``);
- ``check`` with no container checked answers ``nothing_checked``, exit code 2, in the
  API, ``manage.py check-manifests`` and the curl pipeline example;
- ``rightsize`` notes every document it left alone (an unknown workload first).
"""

from __future__ import annotations

import dataclasses
import io
import shutil
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
import yaml
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from recommender.engine.resources import Resources
from recommender.models import Workload
from recommender.services.admission.decision import advise_containers
from recommender.services.admission.pod import PodContainerRef
from recommender.services.admission.snapshot import WorkloadEntry
from recommender.services.advice.advise import inputs_for_workload
from tests.api.test_check import SCRIPT, _script
from tests.conftest import service_missing
from tests.factories import make_cluster, make_recommendation, make_workload
from tests.web.conftest import client_for

pytestmark = pytest.mark.django_db
MIB = 2**20
ROOT = Path(__file__).resolve().parents[2]

REPORT = """\
apiVersion: batch/v1
kind: CronJob
metadata: {name: profile-report, namespace: data}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: job
            image: data/report
            resources:
              requests: {cpu: "2", memory: 3Gi}
              limits: {cpu: "2", memory: 3Gi}
"""
UNKNOWN = REPORT.replace("profile-report", "profile-reprot")


@pytest.fixture
def young() -> Workload:
    """data/CronJob/profile-report: 2 cores and 3Gi, recommended 350m and 392Mi
    from 2.6 h of samples (confidence 0.11: the upper bound is 10x)."""
    workload = make_workload(
        make_cluster("prod"),
        "profile-report",
        namespace="data",
        kind=Workload.Kind.CRON_JOB,
        containers={
            "job": {
                "request_cpu_millicores": 2000,
                "request_memory_bytes": 3 * 1024 * MIB,
                "limit_cpu_millicores": 2000,
                "limit_memory_bytes": 3 * 1024 * MIB,
            }
        },
    )
    make_recommendation(
        workload.containers.get(name="job"),
        cpu_millicores=350,
        memory_bytes=392 * MIB,
        history_days=0.11,
    )
    return workload


def _post(client: Client, path: str, body: str, query: str = "") -> Any:
    response = client.post(
        f"/api/v1/{path}?{query}", body, content_type="application/yaml"
    )
    assert response.status_code == 200, response.content
    return response


def _job(manifest: dict[str, Any]) -> dict[str, Any]:
    spec = manifest["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return spec["containers"][0]["resources"]  # type: ignore[no-any-return]


def test_rightsize_leaves_a_young_recommendation_as_the_webhook_does(
    read_client: Client, young: Workload
) -> None:
    answer = _post(read_client, "rightsize", REPORT).json()
    assert answer["manifests"] == [yaml.safe_load(REPORT)]
    (document,) = answer["documents"]
    assert document["status"] == "unchanged"
    (container,) = document["containers"]
    assert container["source"] == "none"
    assert "not enough history yet: 2.6 h of 24 h" in container["reason"]
    assert container["low_confidence"] is False
    assert document["notes"] == [f"container job: {container['reason']}"]
    # The webhook, asked about the same pod, leaves it alone for the same reason.
    entry = dataclasses.replace(
        WorkloadEntry.of(young, young.policy), inputs=inputs_for_workload(young)
    )
    (plan,) = advise_containers(
        entry=entry,
        containers=[
            PodContainerRef(
                list_key="containers",
                index=0,
                name="job",
                requests=Resources(2000, 3 * 1024 * MIB),
                limits=Resources(2000, 3 * 1024 * MIB),
                raw={},
            )
        ],
    )
    assert "not enough history yet: 2.6 h of 24 h" in plan.reason


def test_include_short_history_gives_the_value_flagged_low_confidence(
    read_client: Client, young: Workload
) -> None:
    answer = _post(
        read_client, "rightsize", REPORT, "include_short_history=true"
    ).json()
    assert _job(answer["manifests"][0])["requests"] == {
        "cpu": "350m",
        "memory": "392Mi",
    }
    (container,) = answer["documents"][0]["containers"]
    assert container["low_confidence"] is True
    assert container["notes"][0].startswith(
        "low confidence: not enough history yet: 2.6 h of 24 h"
    )


def test_the_gate_is_the_webhooks_setting(
    read_client: Client, young: Workload, settings: Any
) -> None:
    settings.MIN_HISTORY_HOURS = 2
    answer = _post(read_client, "rightsize", REPORT).json()
    assert _job(answer["manifests"][0])["requests"]["cpu"] == "350m"
    assert answer["documents"][0]["containers"][0]["low_confidence"] is False


def test_check_does_not_pass_a_young_recommendation_and_checks_it_when_asked(
    read_client: Client, young: Workload
) -> None:
    response = _post(read_client, "check", REPORT)
    check = response.json()
    # Nothing checked: not a pass.
    assert (check["verdict"], check["exit_code"]) == ("nothing_checked", 2)
    assert response["Vpaweb-Exit-Code"] == "2"
    assert "not enough history yet: 2.6 h of 24 h" in check["message"]
    asked = _post(read_client, "check", REPORT, "include_short_history=true").json()
    assert (asked["verdict"], asked["exit_code"]) == ("drift", 1)
    (container,) = asked["containers"]
    assert container["low_confidence"] is True


def test_the_namespace_patch_leaves_young_recommendations_out(
    read_client: Client, young: Workload
) -> None:
    url = "/api/v1/clusters/prod/namespaces/data/patch"
    gated = read_client.get(url).json()
    assert gated["workloads"] == []
    assert gated["patches"]["files"] == {}
    assert gated["checked"]["unchecked"] == 1
    asked = read_client.get(f"{url}?include_short_history=true").json()
    assert [w["workload"]["name"] for w in asked["workloads"]] == ["profile-report"]
    assert asked["workloads"][0]["containers"][0]["low_confidence"] is True


def test_the_workload_pages_snippets_leave_a_young_recommendation_out(
    viewer: Any, young: Workload
) -> None:
    client = client_for(viewer)
    page = client.get(reverse("workload", args=[young.pk])).content.decode()
    assert 'data-testid="kubectl-patch"' not in page
    assert "job: not enough history yet: 2.6 h of 24 h" in page
    asked = client.get(
        reverse("workload", args=[young.pk]) + "?include_short_history=1"
    ).content.decode()
    assert 'data-testid="kubectl-patch"' in asked
    assert "350m" in asked
    assert "Low confidence, shown because you asked" in asked


def test_a_check_of_an_unknown_workload_exits_2_nothing_checked(
    read_client: Client, young: Workload
) -> None:
    response = _post(read_client, "check", UNKNOWN, "cluster=prod")
    check = response.json()
    assert (check["verdict"], check["exit_code"]) == ("nothing_checked", 2)
    assert check["summary"]["unchecked"] == 1
    assert check["message"].startswith(
        "nothing checked: CronJob/profile-reprot: unknown workload "
        "data/CronJob/profile-reprot"
    ), check["message"]
    junit = read_client.post(
        "/api/v1/check?format=junit&cluster=prod",
        UNKNOWN,
        content_type="application/yaml",
    ).content
    suite = ET.fromstring(junit).find("testsuite")
    assert suite is not None and suite.get("errors") == "1"


def test_rightsize_notes_every_document_it_left_alone(
    read_client: Client, young: Workload
) -> None:
    answer = _post(read_client, "rightsize", UNKNOWN, "cluster=prod").json()
    (document,) = answer["documents"]
    assert document["status"] == "unchanged"
    assert document["notes"][0].startswith(
        "unknown workload data/CronJob/profile-reprot: vpaweb knows no active "
        "CronJob of that name in namespace data of cluster prod"
    )
    assert document["notes"][1].startswith("container job: left as is:")


def _check_offline(manifests: Path) -> tuple[int, str]:
    out = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command(
            "check-manifests",
            str(manifests),
            "--samples",
            str(ROOT / "docs" / "examples" / "usage.csv"),
            stdout=out,
            stderr=io.StringIO(),
        )
    return int(exited.value.code or 0), out.getvalue()


def test_check_manifests_of_an_unknown_workload_exits_2(tmp_path: Path) -> None:
    manifests = tmp_path / "typo.yaml"
    text = (ROOT / "docs" / "examples" / "shop-web.yaml").read_text()
    manifests.write_text(text.replace("namespace: shop", "namespace: shpo"))
    code, out = _check_offline(manifests)
    assert code == 2
    assert "nothing checked: Deployment/web: unknown workload shpo/Deployment/web" in (
        out
    )


def test_the_pipeline_example_exits_2_when_nothing_was_checked(
    transactional_db: Any,
    young: Workload,
    read_key: str,
    live_server: Any,
    tmp_path: Path,
) -> None:
    if shutil.which("curl") is None or shutil.which("sh") is None:
        service_missing("curl and sh (the pipeline example)")
    assert SCRIPT.exists()
    manifests = tmp_path / "rendered.yaml"
    manifests.write_text(UNKNOWN)
    result = _script(live_server.url, read_key, manifests, tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "vpaweb: nothing was checked" in result.stdout
    assert "unknown workload data/CronJob/profile-reprot" in result.stdout
