"""An in-place resize is verified from what a real kubelet writes (k8s-wire kubelet/,
README §9), against the fake API server playing those states: the resize's answer
bumps ``metadata.generation``; the kubelet then observes it
(``status.observedGeneration``), shows ``PodResizeInProgress`` with
``allocatedResources`` new and the status ``resources`` old, and finally the new
resources with no resize condition. A resize condition the kubelet wrote for an
earlier generation (each condition's ``observedGeneration``) is not this resize's."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from recommender.models import ResizeChange, WorkloadPod
from recommender.services.refresh.discovery import upsert_discovery
from tests.k8s_fake.actuation import FakeCluster
from tests.services.test_updater_fake_api import NOW, cycle, setup_world

pytestmark = pytest.mark.django_db
MI = 2**20
S = ResizeChange.Status


@pytest.fixture
def cleanup() -> Iterator[list[FakeCluster]]:
    fakes: list[FakeCluster] = []
    yield fakes
    for fake in fakes:
        fake.close()


def stored_pod(fake: FakeCluster, name: str) -> dict:
    return next(p for p in fake.server.objects("Pod") if p["metadata"]["name"] == name)


def first_resize(tmp_path, cleanup, *, observed: bool = False):
    """An InPlaceOrRecreate world after the updater's first cycle: the fake, its
    cluster and the pod resized. ``observed``: a 1.35+ kubelet has observed each
    pod's first generation before it."""
    fake, cluster, _ = setup_world(
        tmp_path, mode="InPlaceOrRecreate", approval="automatic"
    )
    cleanup.append(fake)
    if observed:
        for pod in fake.server.objects("Pod"):
            pod["status"]["observedGeneration"] = 1
    cycle(fake, cluster)
    return fake, cluster, fake.server.resized[0][1]


def test_a_resize_is_verified_through_the_recorded_kubelet_states(tmp_path, cleanup):
    fake, cluster, resized = first_resize(tmp_path, cleanup, observed=True)
    change = ResizeChange.objects.get(pod=resized)
    assert change.written_generation == 2  # the resize's answer (kubelet/02)

    # Not observed yet.
    cycle(fake, cluster, NOW + timedelta(seconds=30))
    change.refresh_from_db()
    assert change.status == S.APPLYING
    # In progress (kubelet/03): allocated, not yet in the status resources.
    fake.server.kubelet_resizing("shop", resized)
    cycle(fake, cluster, NOW + timedelta(minutes=1))
    change.refresh_from_db()
    assert change.status == S.APPLYING
    assert change.resize_in_progress_since is not None
    # Done (kubelet/04).
    fake.server.kubelet_actuates("shop", resized)
    cycle(fake, cluster, NOW + timedelta(minutes=2))
    change.refresh_from_db()
    assert change.status == S.APPLIED
    assert change.observed["app"]["requests"] == {"cpu": 250, "memory": 300 * MI}
    assert fake.server.evicted == []


def test_a_resize_condition_of_an_earlier_generation_is_not_this_resizes(
    tmp_path, cleanup
):
    fake, cluster, resized = first_resize(tmp_path, cleanup)
    pod = stored_pod(fake, resized)
    # What an earlier resize left, written for generation 1; the kubelet has not
    # observed this resize (generation 2) yet.
    pod["status"]["observedGeneration"] = 1
    pod["status"]["conditions"].append(
        {
            "type": "PodResizePending",
            "status": "True",
            "reason": "Infeasible",
            "message": "Node didn't have enough capacity: cpu",
            "observedGeneration": 1,
        }
    )
    cycle(fake, cluster, NOW + timedelta(minutes=1))
    change = ResizeChange.objects.get(pod=resized)
    # Not taken for this resize's verdict: no fallback to eviction.
    assert change.status == S.APPLYING and change.method == "in-place"
    assert fake.server.evicted == []
    fake.server.kubelet_actuates("shop", resized)
    cycle(fake, cluster, NOW + timedelta(minutes=2))
    change.refresh_from_db()
    assert change.status == S.APPLIED
    assert fake.server.evicted == []


def test_the_same_condition_for_this_generation_falls_back_as_before(tmp_path, cleanup):
    fake, cluster, resized = first_resize(tmp_path, cleanup)
    pod = stored_pod(fake, resized)
    pod["status"]["observedGeneration"] = 2
    pod["status"]["conditions"].append(
        {
            "type": "PodResizePending",
            "status": "True",
            "reason": "Infeasible",
            "observedGeneration": 2,
        }
    )
    cycle(fake, cluster, NOW + timedelta(minutes=1))
    assert fake.server.evicted == [("shop", resized)]


def test_discovery_stores_the_requests_the_kubelet_actuated(tmp_path, cleanup):
    """The kubelet's status writes move the pod's resourceVersion, as a real API
    server's do (the change marker discovery skips unchanged workloads by): the
    actuated requests reach the stored pod, not only the resize's answer."""
    fake, cluster, resized = first_resize(tmp_path, cleanup, observed=True)

    def discover(at):
        upsert_discovery(cluster=cluster, snapshot=fake.adapter.discover(), now=at)
        return WorkloadPod.objects.get(name=resized).containers["app"]["requests"]

    before = discover(NOW + timedelta(seconds=30))
    assert before != {"cpu": 250, "memory": 300 * MI}
    version = stored_pod(fake, resized)["metadata"]["resourceVersion"]
    fake.server.kubelet_actuates("shop", resized)
    assert stored_pod(fake, resized)["metadata"]["resourceVersion"] != version
    assert discover(NOW + timedelta(minutes=1)) == {"cpu": 250, "memory": 300 * MI}
