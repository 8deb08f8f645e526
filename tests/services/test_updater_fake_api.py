"""The updater against the fake API server (real HTTP, recorded wire behaviour): which
requests an Auto workload receives, PDB 429s, in-place resizes and their fallback,
verification, supersede/expire, and Off means off."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from recommender.models import AuditEvent, Container, Policy, ResizeChange
from recommender.services.actuation import approvals, control
from recommender.services.actuation.cycle import run_cycle
from tests.factories import make_cluster, make_recommendation, make_workload
from tests.k8s_fake.actuation import FakeCluster, deployment, fake_cluster, pdb, pod

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)
MI = 2**20
PODS = [f"api-6b9c8d7f5-p{i}" for i in range(3)]
S = ResizeChange.Status


def setup_world(
    tmp_path: Path,
    *,
    mode: str,
    approval: str = "manual",
    extra: list | None = None,
    replicas: int = 3,
    resize_capable: bool = True,
):
    objects = deployment("api", replicas=replicas) + (extra or [])
    if not resize_capable:
        for obj in objects:
            if obj["kind"] == "Pod":
                obj["status"]["containerStatuses"][0].pop("resources", None)
    fake = fake_cluster(objects, tmp_path)
    cluster = make_cluster("fake", kind="kubernetes", context="fake")
    workload = make_workload(
        cluster,
        "api",
        namespace="shop",
        mode=mode,
        replicas=replicas,
        containers={"app": {"request_cpu_millicores": 500}},
    )
    Policy.objects.filter(workload=workload).update(approval=approval)
    make_recommendation(
        Container.objects.get(workload=workload),
        cpu_millicores=250,
        memory_bytes=300 * MI,
    )
    return fake, cluster, workload


def cycle(fake: FakeCluster, cluster, now=NOW):
    cluster.refresh_from_db()
    return run_cycle(
        cluster,
        now=now,
        snapshot=fake.adapter.discover(),
        writer=fake.writer,
        holder="t",
    )


@pytest.fixture
def cleanup() -> Iterator[list[FakeCluster]]:
    fakes: list[FakeCluster] = []
    yield fakes
    for fake in fakes:
        fake.close()


def test_manual_recreate_proposes_then_evicts_one_pod_per_cycle_with_an_event(
    tmp_path, cleanup
):
    fake, cluster, _ = setup_world(
        tmp_path, mode="Recreate", extra=[pdb("api-pdb", "shop", "api")]
    )
    cleanup.append(fake)
    report = cycle(fake, cluster)
    assert report.proposed == 3 and report.writes == 0
    assert fake.writes() == []  # nothing moves without an approval
    changes = list(ResizeChange.objects.order_by("pod"))
    assert [c.status for c in changes] == [S.PROPOSED] * 3
    first = changes[0]
    assert first.method == "eviction"
    assert first.resources_before["app"]["requests"] == {"cpu": 500, "memory": 512 * MI}
    assert first.resources_after["app"]["requests"] == {"cpu": 250, "memory": 300 * MI}
    # Limits keep their ratio to the request (1 CPU / 500m → 500m; 1Gi / 512Mi → 600Mi).
    assert first.resources_after["app"]["limits"] == {"cpu": 500, "memory": 600 * MI}
    assert "CPU request 500m of container app is above the upper bound 300m" in (
        first.reason
    )
    for change in changes:
        approvals.approve_change(change_id=change.pk, approved_by=None, now=NOW)
    report = cycle(fake, cluster, NOW + timedelta(minutes=1))
    # Tolerance 0.5 of 3 replicas is 1: one eviction this cycle, and its Event.
    assert report.evicted == 1 and report.waiting == 2
    evicted = fake.server.evicted[0][1]
    assert fake.writes() == [
        ("POST", f"/api/v1/namespaces/shop/pods/{evicted}/eviction"),
        ("POST", "/api/v1/namespaces/shop/events"),
    ]
    applying = ResizeChange.objects.get(status=S.APPLYING)
    assert applying.pod == evicted and applying.attempts == 1
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"change.approve", "change.apply"} <= actions


def test_a_pdb_429_is_try_later_not_an_error(tmp_path, cleanup):
    fake, cluster, _ = setup_world(
        tmp_path,
        mode="Recreate",
        approval="automatic",
        extra=[pdb("api-pdb", "shop", "api", allowed=0)],
    )
    cleanup.append(fake)
    report = cycle(fake, cluster)
    assert report.proposed == 3 and report.auto_approved == 3
    # The budget covers the group: one refusal, the other pods wait for a later cycle.
    assert report.try_later == 1 and report.waiting == 2 and report.failed == 0
    change = ResizeChange.objects.get(try_later_count=1)
    assert change.status == S.APPROVED
    assert "DisruptionBudget" not in change.error  # the cause's message is kept
    assert "The disruption budget api-pdb needs 2 healthy pods" in change.error
    # Only the refused eviction was sent: no Event for an eviction that did not happen.
    assert [m for m, _ in fake.writes()] == ["POST"]
    assert fake.writes()[0][1].endswith("/eviction")


def test_in_place_resize_is_verified_once_the_kubelet_actuates_it(tmp_path, cleanup):
    fake, cluster, _ = setup_world(
        tmp_path, mode="InPlaceOrRecreate", approval="automatic"
    )
    cleanup.append(fake)
    report = cycle(fake, cluster)
    assert report.resized == 1
    resized = fake.server.resized[0][1]
    assert fake.writes() == [
        ("PATCH", f"/api/v1/namespaces/shop/pods/{resized}/resize"),
        ("POST", "/api/v1/namespaces/shop/events"),
    ]
    change = ResizeChange.objects.get(pod=resized)
    assert change.status == S.APPLYING and change.method == "in-place"
    fake.server.kubelet_actuates("shop", resized)
    report = cycle(fake, cluster, NOW + timedelta(minutes=1))
    change.refresh_from_db()
    assert change.status == S.APPLIED and change.verified_at is not None
    assert change.observed["app"]["requests"] == {"cpu": 250, "memory": 300 * MI}
    assert report.applied == 1 and report.resized == 1  # the next pod's turn


def test_a_resize_the_pod_spec_already_holds_is_verified_not_sent_again(
    tmp_path, cleanup
):
    # A worker killed while its resize was in flight: the API server took the write
    # (the pod's spec holds the new requests) but no answer was recorded. The next
    # cycle follows the change instead of sending the identical resize again.
    fake, cluster, _ = setup_world(
        tmp_path, mode="InPlaceOrRecreate", approval="automatic"
    )
    cleanup.append(fake)
    cycle(fake, cluster)
    resized = fake.server.resized[0][1]
    change = ResizeChange.objects.get(pod=resized)
    ResizeChange.objects.filter(pk=change.pk).update(written_at=None, written_state={})

    report = cycle(fake, cluster, NOW + timedelta(minutes=1))
    assert report.recovered == 0
    assert fake.server.resized.count(("shop", resized)) == 1
    change.refresh_from_db()
    assert change.status == S.APPLYING and change.attempts == 1

    fake.server.kubelet_actuates("shop", resized)
    cycle(fake, cluster, NOW + timedelta(minutes=2))
    change.refresh_from_db()
    assert change.status == S.APPLIED and change.attempts == 1
    assert fake.server.resized.count(("shop", resized)) == 1


def test_a_resize_refused_by_a_node_without_support_falls_back_to_eviction(
    tmp_path, cleanup
):
    fake, cluster, _ = setup_world(
        tmp_path,
        mode="InPlaceOrRecreate",
        approval="automatic",
        resize_capable=False,
    )
    cleanup.append(fake)
    report = cycle(fake, cluster)
    assert report.fell_back == 1 and report.evicted == 1 and report.resized == 0
    methods = [(m, p.rsplit("/", 1)[1]) for m, p in fake.writes()]
    assert methods == [("PATCH", "resize"), ("POST", "eviction"), ("POST", "events")]
    change = ResizeChange.objects.get(status=S.APPLYING)
    assert change.method == "eviction"
    assert "Pod running on node without support for resize" in change.error


def test_a_deferred_resize_waits_five_minutes_then_evicts(tmp_path, cleanup):
    fake, cluster, _ = setup_world(
        tmp_path, mode="InPlaceOrRecreate", approval="automatic"
    )
    cleanup.append(fake)
    cycle(fake, cluster)
    resized = fake.server.resized[0][1]
    target = next(
        p for p in fake.server.objects("Pod") if p["metadata"]["name"] == resized
    )
    target["status"]["conditions"].append(
        {"type": "PodResizePending", "status": "True", "reason": "Deferred"}
    )
    cycle(fake, cluster, NOW + timedelta(minutes=1))
    change = ResizeChange.objects.get(pod=resized)
    assert change.status == S.APPLYING and change.resize_pending_since is not None
    assert fake.server.evicted == []
    cycle(fake, cluster, NOW + timedelta(minutes=7))
    change.refresh_from_db()
    assert change.method == "eviction" and change.status == S.APPLYING
    assert fake.server.evicted == [("shop", resized)]


def test_an_eviction_is_verified_on_the_replacement_or_failed_with_what_it_has(
    tmp_path, cleanup
):
    fake, cluster, _ = setup_world(tmp_path, mode="Recreate", approval="automatic")
    cleanup.append(fake)
    cycle(fake, cluster)
    evicted = fake.server.evicted[0][1]
    # The ReplicaSet replaces the pod; admission gave it other requests than asked.
    fake.server.remove("Pod", "shop", evicted)
    resources = {"requests": {"cpu": "400m", "memory": "512Mi"}}
    replacement = pod("api-6b9c8d7f5-new", "shop", "api", "api-6b9c8d7f5", resources)
    replacement["metadata"]["creationTimestamp"] = "2026-11-24T06:00:30Z"
    fake.server.add(replacement)
    cycle(fake, cluster, NOW + timedelta(minutes=1))
    change = ResizeChange.objects.get(pod=evicted)
    assert change.status == S.FAILED
    assert change.observed["app"]["requests"]["cpu"] == 400
    assert "does not carry the new requests" in change.error


def test_a_newer_recommendation_supersedes_and_a_vanished_pod_expires(
    tmp_path, cleanup
):
    fake, cluster, workload = setup_world(tmp_path, mode="Recreate")
    cleanup.append(fake)
    cycle(fake, cluster)
    make_recommendation(
        Container.objects.get(workload=workload),
        cpu_millicores=200,
        memory_bytes=280 * MI,
    )
    fake.server.remove("Pod", "shop", PODS[2])
    report = cycle(fake, cluster, NOW + timedelta(minutes=1))
    assert report.superseded == 2 and report.expired == 1 and report.proposed == 2
    statuses = sorted(ResizeChange.objects.values_list("pod", "status"))
    assert statuses == sorted(
        [
            (PODS[0], S.SUPERSEDED),
            (PODS[1], S.SUPERSEDED),
            (PODS[2], S.EXPIRED),
            (PODS[0], S.PROPOSED),
            (PODS[1], S.PROPOSED),
        ]
    )
    assert fake.writes() == []


def test_min_replicas_keeps_a_lone_pod_from_being_evicted(tmp_path, cleanup):
    fake, cluster, _ = setup_world(
        tmp_path, mode="Recreate", approval="automatic", replicas=1
    )
    cleanup.append(fake)
    report = cycle(fake, cluster)
    # Upstream never disrupts a group below min_replicas: nothing is even proposed
    # (a change approved automatically would wait forever).
    assert report.proposed == 0 and report.evicted == 0
    assert not ResizeChange.objects.exists()
    assert fake.writes() == []


@pytest.mark.parametrize("switch", ["kill_switch_setting", "admin", "pause", "dry_run"])
def test_every_switch_stops_every_write(tmp_path, cleanup, settings, switch):
    fake, cluster, _ = setup_world(tmp_path, mode="Recreate", approval="automatic")
    cleanup.append(fake)
    if switch == "kill_switch_setting":
        settings.UPDATER_KILL_SWITCH = True
    elif switch == "admin":
        control.set_kill_switch(stopped=True, actor=None, now=NOW, reason="incident")
    elif switch == "pause":
        control.set_cluster_paused(cluster=cluster, paused=True, actor=None, now=NOW)
    else:
        settings.UPDATER_DRY_RUN = True
    for minute in range(5):
        report = cycle(fake, cluster, NOW + timedelta(minutes=minute))
        assert report.writes_blocked
    assert ResizeChange.objects.filter(status=S.APPROVED).count() == 3
    assert fake.writes() == []


def test_off_and_mirrored_policies_get_zero_writes_over_many_cycles(tmp_path, cleanup):
    objects = deployment("api") + deployment("web") + deployment("db")
    fake = fake_cluster(objects, tmp_path)
    cleanup.append(fake)
    cluster = make_cluster("fake", kind="kubernetes", context="fake")
    for name, mode, source in (
        ("api", "Off", "vpaweb"),
        ("web", "Initial", "vpaweb"),
        ("db", "Recreate", "vpa-object"),  # mirrors an upstream VPA: never acted on
    ):
        workload = make_workload(
            cluster, name, namespace="shop", mode=mode, containers={"app": {}}
        )
        Policy.objects.filter(workload=workload).update(
            source=source, approval="automatic"
        )
        make_recommendation(
            Container.objects.get(workload=workload), cpu_millicores=100
        )
    for minute in range(20):
        report = cycle(fake, cluster, NOW + timedelta(minutes=minute))
        assert report.proposed == 0
    assert fake.writes() == []
    assert not ResizeChange.objects.exists()


def test_only_the_lease_holder_acts(tmp_path, cleanup):
    fake, cluster, _ = setup_world(tmp_path, mode="Recreate", approval="automatic")
    cleanup.append(fake)
    assert control.acquire_lock(cluster_id=cluster.pk, holder="other", now=NOW)
    report = cycle(fake, cluster)
    assert report.not_leader and fake.writes() == []
    assert not ResizeChange.objects.exists()
    # The other holder died: its lease expires after three intervals.
    later = NOW + timedelta(seconds=control.lock_ttl_s() + 1)
    report = cycle(fake, cluster, later)
    assert not report.not_leader and report.proposed == 3
