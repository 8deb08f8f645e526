"""InPlace mode against the fake API server: pods are resized in place and never
evicted. A resize the pod's node cannot hold (the recorded NodeCapacity 403, k8s-wire
kubelet/06) fails as infeasible and is not sent again until the recommendation
changes; a Deferred resize is tried again with back-off, not evicted; a missing resize
permission makes changes wait, not evict."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from recommender.models import Container, Policy, ResizeChange
from recommender.services.actuation import workflow
from tests.factories import make_cluster, make_recommendation, make_workload
from tests.k8s_fake.actuation import FakeCluster, deployment, fake_cluster
from tests.services.test_resize_refusals_fake_api import small_node
from tests.services.test_updater_fake_api import NOW, cycle

pytestmark = pytest.mark.django_db
MI = 2**20
S = ResizeChange.Status


@pytest.fixture
def cleanup() -> Iterator[list[FakeCluster]]:
    fakes: list[FakeCluster] = []
    yield fakes
    for fake in fakes:
        fake.close()


def world(tmp_path, *, cpu: int, nodes=()):
    fake = fake_cluster(deployment("api") + list(nodes), tmp_path)
    cluster = make_cluster("fake", kind="kubernetes", context="fake")
    workload = make_workload(
        cluster,
        "api",
        namespace="shop",
        mode="InPlace",
        replicas=3,
        containers={"app": {"request_cpu_millicores": 500}},
    )
    Policy.objects.filter(workload=workload).update(approval="automatic")
    recommend(workload, cpu)
    return fake, cluster, workload


def recommend(workload, cpu: int) -> None:
    make_recommendation(
        Container.objects.get(workload=workload),
        cpu_millicores=cpu,
        memory_bytes=512 * MI,
    )


def resizes(fake: FakeCluster) -> list[str]:
    return [p for m, p in fake.writes() if p.endswith("/resize")]


def test_an_infeasible_resize_is_remembered_and_never_evicted(tmp_path, cleanup):
    fake, cluster, workload = world(tmp_path, cpu=3000, nodes=[small_node()])
    cleanup.append(fake)
    cycle(fake, cluster, NOW)
    failed = ResizeChange.objects.filter(status=S.FAILED)
    assert failed.count() == 3  # each pod's resize was tried once
    for change in failed:
        assert change.method == "in-place"
        assert change.error.startswith(workflow.INFEASIBLE_ERROR)
        assert "node didn't have enough allocatable resources" in change.error
    sent = len(resizes(fake))
    assert sent == 3
    # The same resize is not proposed again, nor sent, nor evicted instead.
    for minute in range(1, 6):
        report = cycle(fake, cluster, NOW + timedelta(minutes=minute))
    assert report.infeasible >= 1
    assert fake.server.evicted == []
    assert len(resizes(fake)) == sent
    cluster.refresh_from_db()
    assert cluster.write_backoff == {}  # not a lost permission
    # A new recommendation the node can hold is tried.
    recommend(workload, 1500)
    cycle(fake, cluster, NOW + timedelta(minutes=10))
    assert len(resizes(fake)) > sent
    assert fake.server.evicted == []


def test_a_deferred_resize_is_tried_again_with_back_off_never_evicted(
    tmp_path, cleanup
):
    fake, cluster, _ = world(tmp_path, cpu=250)
    cleanup.append(fake)
    cycle(fake, cluster, NOW)
    resized = fake.server.resized[0][1]
    target = next(
        p for p in fake.server.objects("Pod") if p["metadata"]["name"] == resized
    )
    # The condition upstream's updater reads (no k8s-wire recording holds one).
    target["status"]["conditions"].append(
        {"type": "PodResizePending", "status": "True", "reason": "Deferred"}
    )
    cycle(fake, cluster, NOW + timedelta(minutes=1))
    cycle(fake, cluster, NOW + timedelta(minutes=7))  # past the 5 min of Deferred
    change = ResizeChange.objects.get(pod=resized)
    assert change.status == S.APPROVED and change.try_later_count == 1
    assert "Deferred" in change.error and "back-off" in change.error
    assert fake.server.evicted == []
    sent = fake.server.resized.count(("shop", resized))
    # Not before the back-off (5 min after the last attempt), then sent again.
    cycle(fake, cluster, NOW + timedelta(minutes=8))
    assert fake.server.resized.count(("shop", resized)) == sent
    cycle(fake, cluster, NOW + timedelta(minutes=13))
    assert fake.server.resized.count(("shop", resized)) == sent + 1
    assert fake.server.evicted == []


def test_without_the_resize_permission_changes_wait_instead_of_evicting(
    tmp_path, cleanup
):
    fake, cluster, _ = world(tmp_path, cpu=250)
    cleanup.append(fake)
    fake.server.deny("", "pods/resize", "patch")
    cluster.actuation_allowed = True
    cluster.save(update_fields=["actuation_allowed"])
    for minute in range(3):
        report = cycle(fake, cluster, NOW + timedelta(minutes=minute))
    assert fake.server.evicted == [] and resizes(fake) == []
    assert report.waiting == 3
    change = ResizeChange.objects.filter(status=S.APPROVED).first()
    assert "InPlace never evicts" in change.error
