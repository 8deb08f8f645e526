"""The updater's un-boost against the fake API server (real HTTP): the recorded pod of a
real kubelet (tests/fixtures/k8s-wire/kubelet/01), admitted boosted by the webhook, is
left alone until Ready for the boost's duration, then shrunk in place with the
strategic merge patch of pods/resize the API server took (kubelet/02), once; never
evicted, never while the workload is Off."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from prometheus_client import REGISTRY

from recommender.models import AuditEvent, Container, Policy, ResizeChange
from recommender.roles import Role
from recommender.services.actuation.cycle import run_cycle
from tests.factories import make_cluster, make_recommendation, make_user, make_workload
from tests.k8s_fake.actuation import FakeCluster, deployment, fake_cluster
from tests.web.conftest import client_for

pytestmark = pytest.mark.django_db

KUBELET = Path(__file__).resolve().parents[1] / "fixtures" / "k8s-wire" / "kubelet"
READY_AT = datetime(2026, 12, 6, 6, 22, 47, tzinfo=UTC)  # the recording's Ready
MI = 2**20
POD = "rzreal-7b876c7686-mjgzh"
RESIZE = f"/api/v1/namespaces/vt-node/pods/{POD}/resize"
BOOST = {
    "duration_s": 300,
    "containers": {"app": {"requests": {"cpu": "163m"}, "limits": {"cpu": "326m"}}},
}


def boosted_pod(boost: dict[str, Any] = BOOST) -> dict[str, Any]:
    """The recorded Running, Ready pod as the webhook admits it boosted 2x: CPU
    326m/652m in spec and status, the unboosted 163m/326m in its annotation."""
    recorded = json.loads(
        (
            KUBELET / "01-pod-after-vpaweb-in-place-resize-real-kubelet-200.json"
        ).read_text()
    )["response"]["body"]
    pod = copy.deepcopy(recorded)
    meta = pod["metadata"]
    meta.pop("managedFields", None)
    meta["annotations"] = {"vpaweb.io/startup-boost": json.dumps(boost)}
    # Owned by the fake's ReplicaSet of Deployment rzreal.
    meta["ownerReferences"][0].update(name="rzreal-6b9c8d7f5", uid="rs-rzreal")
    meta["labels"]["pod-template-hash"] = "6b9c8d7f5"
    boosted = {"cpu": "326m"}, {"cpu": "652m"}
    for holder in (pod["spec"]["containers"][0], pod["status"]["containerStatuses"][0]):
        holder["resources"]["requests"].update(boosted[0])
        holder["resources"]["limits"].update(boosted[1])
    return pod


def setup_world(
    tmp_path: Path, pod: dict[str, Any] | None = None
) -> tuple[FakeCluster, Any, Any]:
    objects = [
        o for o in deployment("rzreal", "vt-node", replicas=1) if o["kind"] != "Pod"
    ]
    fake = fake_cluster([*objects, pod or boosted_pod()], tmp_path)
    cluster = make_cluster("fake", kind="kubernetes", context="fake")
    workload = make_workload(
        cluster,
        "rzreal",
        namespace="vt-node",
        mode=Policy.Mode.IN_PLACE_OR_RECREATE,
        replicas=1,
        containers={"app": {"request_cpu_millicores": 163}},
    )
    Policy.objects.filter(workload=workload).update(
        approval="automatic",
        min_replicas=1,
        startup_boost={"factor": 2.0, "duration_s": 300},
    )
    make_recommendation(
        Container.objects.get(workload=workload),
        cpu_millicores=163,
        memory_bytes=250 * MI,
    )
    return fake, cluster, workload


def cycle(fake: FakeCluster, cluster: Any, now: datetime) -> Any:
    cluster.refresh_from_db()
    return run_cycle(
        cluster,
        now=now,
        snapshot=fake.adapter.discover(),
        writer=fake.writer,
        holder="t",
    )


def unboosts_counted() -> float:
    value = REGISTRY.get_sample_value(
        "vpaweb_startup_boosts_total", {"event": "unboosted"}
    )
    return value or 0.0


@pytest.fixture
def cleanup() -> Iterator[list[FakeCluster]]:
    fakes: list[FakeCluster] = []
    yield fakes
    for fake in fakes:
        fake.close()


def boost_panel(workload: Any) -> str:
    """The workload page's startup boost paragraph, as a viewer sees it."""
    viewer = client_for(
        get_user_model().objects.filter(username="vera").first()
        or make_user("vera", Role.VIEWER)
    )
    page = viewer.get(f"/workloads/{workload.pk}/").content.decode()
    start = page.index('data-testid="startup-boost"')
    return page[start : page.index("</p>", start)]


def test_a_boosted_pod_is_shrunk_in_place_once_ready_for_the_duration(
    tmp_path, cleanup
):
    fake, cluster, workload = setup_world(tmp_path)
    cleanup.append(fake)
    before = unboosts_counted()
    # Ready for 299 s of 300: left boosted, and no change proposed for the boost.
    report = cycle(fake, cluster, READY_AT + timedelta(seconds=299))
    assert report.proposed == 0 and report.unboosted == 0
    assert fake.writes() == []
    assert not ResizeChange.objects.exists()
    panel = boost_panel(workload)
    assert "CPU ×2 until Ready + 300 s" in panel
    assert f"Pod {POD} boosted until" in panel and "2026-12-06 06:27:47" in panel

    report = cycle(fake, cluster, READY_AT + timedelta(seconds=300))
    assert report.unboosted == 1
    assert fake.writes() == [("PATCH", RESIZE)]
    sent = next(r for r in fake.server.write_verbs() if r.path == RESIZE)
    # The shape of kubelet/02: a strategic merge patch naming the container; the
    # limit goes back with its request, so the QoS class (Burstable) is kept.
    assert json.loads(sent.body) == {
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "resources": {
                        "requests": {"cpu": "163m"},
                        "limits": {"cpu": "326m"},
                    },
                }
            ]
        }
    }
    assert unboosts_counted() == before + 1
    audit = AuditEvent.objects.get(action="pod.unboost")
    assert audit.object_id == POD and "163m (limit 326m)" in audit.message
    panel = boost_panel(workload)
    assert "1 boosted pod shrunk back in place so far" in panel
    assert "boosted until" not in panel

    # Taken, not yet actuated (status still 326m): nothing more sent or proposed;
    # nor once the kubelet runs the recommendation.
    for actuated in (False, True):
        if actuated:
            fake.server.kubelet_actuates("vt-node", POD)
        report = cycle(fake, cluster, READY_AT + timedelta(seconds=400))
        assert report.unboosted == 0 and report.proposed == 0
        assert fake.writes() == [("PATCH", RESIZE)]


def test_an_off_workload_keeps_its_boost(tmp_path, cleanup):
    fake, cluster, workload = setup_world(tmp_path)
    cleanup.append(fake)
    Policy.objects.filter(workload=workload).update(mode=Policy.Mode.OFF)
    report = cycle(fake, cluster, READY_AT + timedelta(hours=1))
    assert report.unboosted == 0
    assert fake.writes() == []


def test_a_pod_not_ready_stays_boosted(tmp_path, cleanup):
    pod = boosted_pod()
    for condition in pod["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition["status"] = "False"
    fake, cluster, _ = setup_world(tmp_path, pod)
    cleanup.append(fake)
    report = cycle(fake, cluster, READY_AT + timedelta(hours=1))
    assert report.unboosted == 0 and report.proposed == 0
    assert fake.writes() == []


def test_a_refused_shrink_is_retried_never_evicted(tmp_path, cleanup):
    # A Guaranteed pod whose record (hand-edited) drops the limit: shrinking the
    # request alone would make it Burstable, which the API server refuses with 422
    # (k8s-wire resize/07, played by the fake).
    pod = boosted_pod()
    app = pod["spec"]["containers"][0]["resources"]
    pod["status"]["containerStatuses"][0]["resources"] = app
    app["requests"] = dict(app["limits"])
    pod["metadata"]["annotations"] = {
        "vpaweb.io/startup-boost": json.dumps(
            {"duration_s": 0, "containers": {"app": {"requests": {"cpu": "163m"}}}}
        )
    }
    fake, cluster, _ = setup_world(tmp_path, pod)
    cleanup.append(fake)
    for minute in (1, 2):
        report = cycle(fake, cluster, READY_AT + timedelta(minutes=minute))
        assert report.unboost_refused == 1 and report.unboosted == 0
        assert report.evicted == 0 and report.proposed == 0
    assert fake.writes() == [("PATCH", RESIZE)] * 2
    assert not AuditEvent.objects.filter(action="pod.unboost").exists()
