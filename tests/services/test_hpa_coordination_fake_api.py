"""Coordinated HPA mode against the fake API server (real HTTP, the answers k8s-wire
hpa/ recorded): the updater proposes the resize and the HPA target change as one
change, patches the HPA with a JSON patch that tests the old value before it resizes
in place, reads the HPA back to verify, and reads each recorded failure (a failed test
is a bare 422, a conflict a 409, no permission a 403) as it should."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from recommender.models import Container, Policy, ResizeChange, Workload
from recommender.services.actuation import approvals
from recommender.services.actuation.cycle import run_cycle
from tests.factories import make_cluster, make_recommendation, make_workload
from tests.k8s_fake.actuation import FakeCluster, deployment, fake_cluster, hpa
from tests.k8s_fake.hpa import answer_next_patch

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)
MI = 2**20
S = ResizeChange.Status
PODS = [f"api-6b9c8d7f5-p{i}" for i in range(3)]
HPA_PATH = "/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers/api"
# As discovery stores the conflict of the HPA above (cluster_objects._hpa_conflicts_of).
CONFLICTS = [
    {
        "name": "api",
        "resources": ["cpu", "memory"],
        "min_replicas": 2,
        "max_replicas": 8,
        "metrics": [
            {
                "resource": "cpu",
                "container": "",
                "target_type": "Utilization",
                "average_utilization": 70,
                "average_value": None,
            },
            {
                "resource": "memory",
                "container": "app",
                "target_type": "AverageValue",
                "average_utilization": None,
                "average_value": 400 * MI,
            },
        ],
    }
]
TO_140 = [
    {
        "op": "test",
        "path": "/spec/metrics/0/resource/target/averageUtilization",
        "value": 70,
    },
    {
        "op": "replace",
        "path": "/spec/metrics/0/resource/target/averageUtilization",
        "value": 140,
    },
]


@pytest.fixture
def cleanup() -> Iterator[list[FakeCluster]]:
    fakes: list[FakeCluster] = []
    yield fakes
    for fake in fakes:
        fake.close()


def world(
    tmp_path: Path,
    cleanup: list[FakeCluster],
    *,
    approval: str = "automatic",
    coordination: str = "coordinated",
    resize_capable: bool = True,
    actuation_allowed: bool = True,
) -> tuple[FakeCluster, Any, Workload]:
    """shop/api: 3 pods at 500m and 512Mi (limits 1 and 1Gi), recommended 250m and
    300Mi; an HPA on 70 % cpu and 400Mi of app's memory."""
    objects = [*deployment("api"), hpa("api")]
    if not resize_capable:
        for obj in objects:
            if obj["kind"] == "Pod":
                obj["status"]["containerStatuses"][0].pop("resources", None)
    fake = fake_cluster(objects, tmp_path)
    cleanup.append(fake)
    cluster = make_cluster(
        "fake", kind="kubernetes", context="fake", actuation_allowed=actuation_allowed
    )
    workload = make_workload(
        cluster,
        "api",
        namespace="shop",
        mode="InPlaceOrRecreate",
        containers={
            "app": {
                "request_cpu_millicores": 500,
                "request_memory_bytes": 512 * MI,
                "limit_cpu_millicores": 1000,
                "limit_memory_bytes": 1024 * MI,
            }
        },
    )
    Workload.objects.filter(pk=workload.pk).update(hpa_conflicts=CONFLICTS)
    Policy.objects.filter(workload=workload).update(
        approval=approval, hpa_coordination=coordination
    )
    make_recommendation(
        Container.objects.get(workload=workload),
        cpu_millicores=250,
        memory_bytes=300 * MI,
    )
    return fake, cluster, workload


def cycle(fake: FakeCluster, cluster: Any, now: datetime = NOW) -> Any:
    cluster.refresh_from_db()
    return run_cycle(
        cluster, now=now, snapshot=fake.adapter.discover(), writer=fake.writer
    )


def roll_out(fake: FakeCluster, cluster: Any, cycles: int = 3) -> list[Any]:
    """Run ``cycles`` cycles a minute apart, the kubelet actuating each resize (one
    pod of the group per cycle: the eviction tolerance); their reports."""
    reports = []
    for minute in range(cycles):
        reports.append(cycle(fake, cluster, NOW + timedelta(minutes=minute)))
        for name in PODS:
            fake.server.kubelet_actuates("shop", name)
    return reports


def hpa_patches(fake: FakeCluster) -> list[Any]:
    return [
        json.loads(r.body)
        for r in fake.server.write_verbs()
        if r.method == "PATCH" and r.path == HPA_PATH
    ]


def live_cpu_target(fake: FakeCluster) -> Any:
    (obj,) = fake.server.objects("HorizontalPodAutoscaler")
    return obj["spec"]["metrics"][0]["resource"]["target"]


def test_the_resize_and_the_hpa_change_are_proposed_as_one_change(tmp_path, cleanup):
    fake, cluster, _ = world(tmp_path, cleanup, approval="manual")
    report = cycle(fake, cluster)
    assert report.proposed == 3 and fake.writes() == []
    change = ResizeChange.objects.order_by("pod").first()
    assert change is not None
    # CPU is resized too (not left to the HPA), with the HPA's target moving in step:
    # 70 % of 500m = 350m per pod; at 250m the same trigger is 140 %.
    assert change.resources_after["app"]["requests"] == {"cpu": 250, "memory": 300 * MI}
    (entry,) = change.hpa_changes
    assert entry["hpa"] == "api" and entry["path"] == "/spec/metrics/0/resource/target"
    assert entry["before"] == {"type": "Utilization", "averageUtilization": 70}
    assert entry["after"] == {"type": "Utilization", "averageUtilization": 140}
    assert "with the HPA: HPA api cpu 70 % -> 140 %" in change.reason


def test_left_to_the_hpa_without_coordination(tmp_path, cleanup):
    fake, cluster, _ = world(tmp_path, cleanup, approval="manual", coordination="leave")
    report = cycle(fake, cluster)
    # Upstream's rule: no change to a resource an HPA scales on (here both).
    assert report.proposed == 0 and not ResizeChange.objects.exists()


def test_it_patches_the_hpa_with_a_tested_json_patch_then_resizes_and_reads_it_back(
    tmp_path, cleanup
):
    fake, cluster, _ = world(tmp_path, cleanup)
    reports = roll_out(fake, cluster)
    assert [r.resized for r in reports] == [1, 1, 1]
    # One HPA patch, before the first resize; its siblings find the HPA there, and
    # stay the changes they were proposed as.
    writes = fake.writes()
    assert writes[0] == ("PATCH", HPA_PATH)
    assert writes[1] == ("PATCH", f"/api/v1/namespaces/shop/pods/{PODS[0]}/resize")
    assert hpa_patches(fake) == [TO_140]
    assert sum(r.superseded for r in reports) == 0
    request = next(r for r in fake.server.write_verbs() if r.path == HPA_PATH)
    assert request.content_type == "application/json-patch+json"
    assert live_cpu_target(fake) == {"type": "Utilization", "averageUtilization": 140}
    # The other metric is untouched (a JSON patch, not a list replaced whole).
    (obj,) = fake.server.objects("HorizontalPodAutoscaler")
    assert len(obj["spec"]["metrics"]) == 2
    assert sorted(ResizeChange.objects.values_list("hpa_state", flat=True)) == [
        "",
        "",
        "patched",
    ]
    report = cycle(fake, cluster, NOW + timedelta(minutes=3))
    assert sum(r.applied for r in reports) + report.applied == 3
    assert set(ResizeChange.objects.values_list("status", flat=True)) == {S.APPLIED}


def test_verification_reads_the_hpa_back(tmp_path, cleanup, settings):
    fake, cluster, _ = world(tmp_path, cleanup)
    cycle(fake, cluster)
    fake.server.kubelet_actuates("shop", PODS[0])
    # Someone sets the HPA elsewhere after the patch: the change is not verified.
    (obj,) = fake.server.objects("HorizontalPodAutoscaler")
    obj["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] = 90
    report = cycle(fake, cluster, NOW + timedelta(minutes=1))
    assert report.applied == 0
    first = ResizeChange.objects.get(pod=PODS[0])
    assert first.status == S.APPLYING
    late = NOW + timedelta(seconds=settings.UPDATER_VERIFY_TIMEOUT_S + 60)
    cycle(fake, cluster, late)
    first.refresh_from_db()
    assert first.status == S.FAILED
    assert first.error == "not verified in time: HPA api carries 90 %, not 140 %"


def test_a_failed_test_is_a_bare_422_nothing_is_resized_and_it_is_decided_again(
    tmp_path, cleanup
):
    fake, cluster, _ = world(tmp_path, cleanup)
    snapshot = fake.adapter.discover()
    # The HPA changes between the read and the write: the test of 70 fails.
    (obj,) = fake.server.objects("HorizontalPodAutoscaler")
    obj["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] = 65
    cluster.refresh_from_db()
    report = run_cycle(cluster, now=NOW, snapshot=snapshot, writer=fake.writer)
    assert report.resized == 0
    assert [m for m, p in fake.writes() if "/resize" in p] == []
    first = ResizeChange.objects.get(pod=PODS[0])
    assert first.status == S.APPROVED
    assert "the HPA changed since it was read (HTTP 422 Invalid: the server " in (
        first.error
    )
    # Re-read and re-decided: from 65 %, 130 %.
    report = cycle(fake, cluster, NOW + timedelta(minutes=1))
    assert report.resized == 1 and report.superseded == 3
    assert live_cpu_target(fake) == {"type": "Utilization", "averageUtilization": 130}
    assert ResizeChange.objects.get(pk=first.pk).status == S.SUPERSEDED


def test_a_conflict_409_is_read_as_the_hpa_having_changed(tmp_path, cleanup):
    fake, cluster, _ = world(tmp_path, cleanup)
    answer_next_patch(fake.server, "21-merge-patch-stale-resourceVersion-409.json")
    report = cycle(fake, cluster)
    first = ResizeChange.objects.get(pod=PODS[0])
    assert first.status == S.APPROVED and first.attempts == 1
    assert "HTTP 409 Conflict" in first.error
    resized = [p for _, p in fake.writes() if p.endswith("/resize")]
    assert f"/api/v1/namespaces/shop/pods/{PODS[0]}/resize" not in resized
    # A sibling tested the old value itself: its patch took, and so did its resize.
    assert report.resized == 1 and report.try_later == 1
    assert live_cpu_target(fake)["averageUtilization"] == 140


def test_without_permission_the_hpa_is_not_patched_and_nothing_resized(
    tmp_path, cleanup
):
    fake, cluster, _ = world(tmp_path, cleanup)
    fake.server.deny("autoscaling", "horizontalpodautoscalers", "patch")
    report = cycle(fake, cluster)
    # The access review said no: no PATCH at all, and the pods wait.
    assert report.resized == 0 and report.waiting == 3
    reviewed = [r["resource"] for r in fake.access_reviews()]
    assert reviewed.count("horizontalpodautoscalers") == 1
    assert [m for m, _ in fake.writes()] == []
    cluster.refresh_from_db()
    assert cluster.write_permissions["paths"]["hpa_targets"]["allowed"] is False


def test_a_403_on_the_patch_itself_resizes_nothing(tmp_path, cleanup):
    fake, cluster, _ = world(tmp_path, cleanup, approval="manual")
    cycle(fake, cluster)  # asks the permissions: allowed
    # The role loses the rule afterwards: the patch meets the recorded 403.
    fake.server.deny("autoscaling", "horizontalpodautoscalers", "patch")
    for change in ResizeChange.objects.all():
        approvals.approve_change(change_id=change.pk, approved_by=None, now=NOW)
    report = cycle(fake, cluster, NOW + timedelta(minutes=1))
    assert report.resized == 0
    assert [m for m, p in fake.writes() if p == HPA_PATH] == ["PATCH"]
    assert [p for _, p in fake.writes() if "/resize" in p] == []
    first = ResizeChange.objects.get(pod=PODS[0])
    assert first.status == S.APPROVED
    assert 'cannot patch resource "horizontalpodautoscalers"' in first.error
    cluster.refresh_from_db()
    assert "hpa_targets" in cluster.write_backoff


def test_a_refused_resize_sets_the_hpa_back_and_never_evicts(tmp_path, cleanup):
    fake, cluster, _ = world(tmp_path, cleanup, resize_capable=False)
    report = cycle(fake, cluster)
    assert report.evicted == 0 and fake.server.evicted == []
    # Patched, refused, set back: the HPA is where it was.
    assert hpa_patches(fake)[:2] == [
        TO_140,
        [
            {
                "op": "test",
                "path": "/spec/metrics/0/resource/target/averageUtilization",
                "value": 140,
            },
            {
                "op": "replace",
                "path": "/spec/metrics/0/resource/target/averageUtilization",
                "value": 70,
            },
        ],
    ]
    assert live_cpu_target(fake)["averageUtilization"] == 70
    failed = ResizeChange.objects.filter(status=S.FAILED).first()
    assert failed is not None and failed.hpa_state == "reverted"
    assert "never evicted" in failed.error and "set back" in failed.error


def test_a_rejected_coordinated_change_stays_rejected(tmp_path, cleanup):
    fake, cluster, _ = world(tmp_path, cleanup, approval="manual")
    cycle(fake, cluster)
    for change in ResizeChange.objects.all():
        approvals.reject_change(
            change_id=change.pk, rejected_by=None, now=NOW, snooze="7d"
        )
    report = cycle(fake, cluster, NOW + timedelta(minutes=1))
    assert report.proposed == 0 and report.held == 3
    assert hpa_patches(fake) == []


def test_a_cluster_not_allowed_to_act_gets_no_write(tmp_path, cleanup):
    fake, cluster, _ = world(tmp_path, cleanup, actuation_allowed=False)
    cycle(fake, cluster)
    assert fake.server.write_verbs() == []


def test_a_pod_the_hpa_takes_away_expires_its_change(tmp_path, cleanup):
    fake, cluster, _ = world(tmp_path, cleanup)
    cycle(fake, cluster)
    applying = ResizeChange.objects.get(status=S.APPLYING)
    fake.server.remove("Pod", "shop", applying.pod)
    report = cycle(fake, cluster, NOW + timedelta(minutes=1))
    applying.refresh_from_db()
    assert applying.status == S.EXPIRED and report.expired >= 1
    assert fake.server.evicted == []
