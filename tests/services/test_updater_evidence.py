"""The updater acts on evidence, against the fake API server: a container that is
not running is not resized in place (its pod is evicted instead), a resize counts
only when the same container runs with the new resources, an eviction only when a
replacement runs with the new requests, and a replacement that cannot schedule
fails the change and hands the workload's next changes to an operator.

The recordings (tests/fixtures/k8s-wire) hold only running, ready containers and
scheduled pods, so the container states and the unschedulable condition below are
set on the *discovered* pods (``PodInfo``), never invented as wire data; parsing the
recorded ``containerStatuses`` is tested on resize/01."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from recommender.cluster.base import PodCondition, PodInfo
from recommender.cluster.kube_objects import pod_of
from recommender.models import Container, ResizeChange
from recommender.services.actuation import approvals, workflow
from recommender.services.actuation.cycle import run_cycle
from tests.factories import make_recommendation
from tests.k8s_fake.actuation import FakeCluster, pod
from tests.services.test_updater_fake_api import MI, NOW, setup_world

pytestmark = pytest.mark.django_db
S = ResizeChange.Status
WIRE = Path(__file__).resolve().parents[1] / "fixtures" / "k8s-wire"


@pytest.fixture
def cleanup() -> Iterator[list[FakeCluster]]:
    fakes: list[FakeCluster] = []
    yield fakes
    for fake in fakes:
        fake.close()


def cycle(fake, cluster, now=NOW, edit=None):
    """One updater cycle; ``edit(pod) -> pod`` changes what discovery saw."""
    cluster.refresh_from_db()
    snapshot = fake.adapter.discover()
    if edit is not None:
        snapshot = replace(
            snapshot,
            workloads=tuple(
                replace(w, pods=tuple(edit(p) for p in w.pods))
                for w in snapshot.workloads
            ),
        )
    return run_cycle(
        cluster, now=now, snapshot=snapshot, writer=fake.writer, holder="t"
    )


def with_state(name=None, **state):
    """An edit setting the app container's state (of pod ``name``, or of all)."""

    def edit(p: PodInfo) -> PodInfo:
        if name is not None and p.name != name:
            return p
        old = p.state_of("app")
        assert old is not None
        return replace(p, container_states=(replace(old, **state),))

    return edit


def test_recorded_container_statuses_are_read():
    body = json.loads((WIRE / "resize" / "01-rz-before.json").read_text())
    info = pod_of(body["response"]["body"])
    state = info.state_of("app")
    assert state is not None and state.running
    assert state.state == "running" and state.restart_count == 0
    assert state.container_id.startswith("containerd://")


def test_a_container_between_restarts_is_evicted_not_resized(tmp_path, cleanup):
    fake, cluster, _ = setup_world(
        tmp_path, mode="InPlaceOrRecreate", approval="automatic"
    )
    cleanup.append(fake)
    crashing = with_state(
        state="waiting", reason="CrashLoopBackOff", ready=False, restart_count=3
    )
    report = cycle(fake, cluster, edit=crashing)
    assert report.resized == 0 and report.evicted == 1
    assert [p.rsplit("/", 1)[1] for _, p in fake.writes()] == ["eviction", "events"]
    change = ResizeChange.objects.get(status=S.APPLYING)
    assert change.method == "eviction"
    assert "container app is waiting (CrashLoopBackOff)" in change.error


def test_a_resize_counts_only_when_the_same_container_runs_with_it(tmp_path, cleanup):
    fake, cluster, _ = setup_world(
        tmp_path, mode="InPlaceOrRecreate", approval="automatic"
    )
    cleanup.append(fake)
    cycle(fake, cluster)
    resized = fake.server.resized[0][1]
    change = ResizeChange.objects.get(pod=resized)
    assert change.written_state == {"app": {"restarts": 0, "id": ""}}
    fake.server.kubelet_actuates("shop", resized)
    # The status lists the new resources, but the container is not ready yet.
    cycle(fake, cluster, NOW + timedelta(minutes=1), with_state(resized, ready=False))
    change.refresh_from_db()
    assert change.status == S.APPLYING
    # It restarted and cannot start again: the resize failed, visibly.
    broken = with_state(
        resized, state="waiting", reason="RunContainerError", restart_count=1
    )
    cycle(fake, cluster, NOW + timedelta(minutes=2), broken)
    change.refresh_from_db()
    assert change.status == S.FAILED
    assert "container app restarted since the resize (restarts 0 -> 1)" in (
        change.error
    )


def test_a_resize_is_verified_when_running_ready_and_not_restarted(tmp_path, cleanup):
    fake, cluster, _ = setup_world(
        tmp_path, mode="InPlaceOrRecreate", approval="automatic"
    )
    cleanup.append(fake)
    cycle(fake, cluster)
    resized = fake.server.resized[0][1]
    fake.server.kubelet_actuates("shop", resized)
    cycle(fake, cluster, NOW + timedelta(minutes=1), with_state(resized, ready=False))
    cycle(fake, cluster, NOW + timedelta(minutes=2))
    change = ResizeChange.objects.get(pod=resized)
    assert change.status == S.APPLIED


def unschedulable(name, since):
    def edit(p: PodInfo) -> PodInfo:
        if p.name != name:
            return p
        condition = PodCondition(
            "PodScheduled",
            "False",
            "Unschedulable",
            "0/1 nodes are available: 1 Insufficient cpu.",
            since,
        )
        return replace(p, phase="Pending", conditions=(condition,), container_states=())

    return edit


def test_an_unschedulable_replacement_fails_the_change_and_waits_for_an_operator(
    tmp_path, cleanup, settings
):
    settings.UPDATER_UNSCHEDULABLE_TIMEOUT_S = 300
    fake, cluster, workload = setup_world(
        tmp_path, mode="Recreate", approval="automatic"
    )
    cleanup.append(fake)
    cycle(fake, cluster)
    evicted = fake.server.evicted[0][1]
    fake.server.remove("Pod", "shop", evicted)
    resources = {"requests": {"cpu": "250m", "memory": "300Mi"}}
    new = "api-6b9c8d7f5-new"
    replacement = pod(new, "shop", "api", "api-6b9c8d7f5", resources, phase="Pending")
    replacement["metadata"]["creationTimestamp"] = "2026-11-24T06:00:30Z"
    fake.server.add(replacement)
    stuck = unschedulable(new, NOW + timedelta(seconds=30))

    # Carrying the new requests is not enough: it does not run.
    report = cycle(fake, cluster, NOW + timedelta(minutes=2), stuck)
    change = ResizeChange.objects.get(pod=evicted)
    assert change.status == S.APPLYING and report.evicted == 0

    report = cycle(fake, cluster, NOW + timedelta(minutes=10), stuck)
    change.refresh_from_db()
    assert change.status == S.FAILED and report.failed == 1
    assert change.error.startswith(workflow.UNSCHEDULABLE_ERROR)
    assert "Insufficient cpu" in change.error
    # The other pods' automatically approved changes wait for an operator now.
    others = ResizeChange.objects.filter(workload=workload).exclude(pk=change.pk)
    assert set(others.values_list("status", flat=True)) == {S.PROPOSED}
    assert report.evicted == 0

    # A newer recommendation: its proposals are not approved automatically either.
    make_recommendation(
        Container.objects.get(workload=workload),
        cpu_millicores=200,
        memory_bytes=280 * MI,
    )
    report = cycle(fake, cluster, NOW + timedelta(minutes=11), stuck)
    assert report.proposed >= 1 and report.auto_approved == 0
    fresh = ResizeChange.objects.filter(workload=workload, status=S.PROPOSED)
    assert all("waits for an operator" in c.reason for c in fresh)

    # Once an operator acted, the policy approves automatically again.
    approvals.approve_change(
        change_id=fresh[0].pk, approved_by=None, now=NOW + timedelta(minutes=11)
    )
    make_recommendation(
        Container.objects.get(workload=workload),
        cpu_millicores=150,
        memory_bytes=250 * MI,
    )
    report = cycle(fake, cluster, NOW + timedelta(minutes=12), stuck)
    assert report.auto_approved >= 1
