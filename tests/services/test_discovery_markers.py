"""Discovery's change markers: a workload whose marker (``WorkloadInfo.version``)
is where the last compare left it (``Workload.discovered_digest``) is not compared
again, nor are its containers; one whose marker moved, or that has none, is."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recommender.cluster import kube_objects
from recommender.cluster.base import ContainerSpec, PodInfo
from recommender.cluster.simulated import build_fleet
from recommender.models import (
    Checkpoint,
    Cluster,
    Container,
    RefreshRun,
    SimulatedPodState,
    SimulatedWorkloadState,
    Workload,
    WorkloadPod,
)
from recommender.services.connections import cluster_adapter_for
from recommender.services.readmodels import changes
from recommender.services.refresh import discovery
from recommender.services.refresh import pods as pods_module
from recommender.services.refresh.cycle import refresh_cluster
from recommender.services.refresh.discovery import upsert_discovery

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def small_fleet(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 40
    settings.SIMULATION_HISTORY_DAYS = 0.25


@pytest.fixture
def cluster(db):
    cluster = Cluster.objects.create(name="markers", kind=Cluster.Kind.SIMULATED)
    run = refresh_cluster(cluster_id=cluster.pk, now=NOW)
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    return cluster


@pytest.fixture
def compared(monkeypatch):
    """The workloads discovery compares, each as its live pods' names (a compared
    workload's live pods are looked at once, by representative_pods)."""
    seen: list[tuple[str, ...]] = []
    real = discovery.representative_pods

    def counting(pods):
        seen.append(tuple(sorted({pod.name for pod in pods})))
        return real(pods)

    monkeypatch.setattr(discovery, "representative_pods", counting)
    return seen


def cronjobs(cluster) -> int:
    return Workload.objects.filter(cluster=cluster, kind=Workload.Kind.CRON_JOB).count()


def refresh(cluster, minutes: int) -> RefreshRun:
    run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=minutes))
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    return run


def test_a_pass_compares_only_the_workloads_whose_marker_moved(cluster, compared):
    """The simulated CronJobs have no marker (their runs come and go): compared every
    pass; every other workload only once its marker moves (here, a resize the writer
    stored in one of its pods), and then what it stores follows."""
    workloads = Workload.objects.filter(cluster=cluster)
    assert cronjobs(cluster) > 0
    assert (
        workloads.exclude(kind=Workload.Kind.CRON_JOB)
        .filter(discovered_digest="")
        .count()
        == 0
    )

    refresh(cluster, 1)
    assert len(compared) == cronjobs(cluster) < workloads.count()

    deployment = workloads.filter(kind=Workload.Kind.DEPLOYMENT).first()
    container = Container.objects.filter(workload=deployment, kind="regular").first()
    snapshot = cluster_adapter_for(cluster, now=NOW).discover()
    info = next(w for w in snapshot.workloads if w.name == deployment.name)
    pod = info.pods[0].name
    SimulatedPodState.objects.create(
        cluster=cluster,
        namespace=deployment.namespace,
        pod=pod,
        containers={
            container.name: {"requests": {"cpu": 1234, "memory": 2**30}, "limits": {}}
        },
    )
    digest = Workload.objects.get(pk=deployment.pk).discovered_digest
    compared.clear()

    refresh(cluster, 2)

    assert len(compared) == cronjobs(cluster) + 1
    assert any(pod in names for names in compared)
    template_cpu = container.request_cpu_millicores
    container.refresh_from_db()
    # The mean of the pods' requests now counts the resized pod's.
    assert container.pods_request_cpu_millicores == pytest.approx(
        (1234 + (len(info.pods) - 1) * template_cpu) / len(info.pods)
    )
    assert Workload.objects.get(pk=deployment.pk).discovered_digest != digest
    compared.clear()

    refresh(cluster, 3)
    assert len(compared) == cronjobs(cluster)


def test_an_operators_annotation_moves_the_marker(cluster, compared):
    workload = Workload.objects.filter(
        cluster=cluster, kind=Workload.Kind.DEPLOYMENT
    ).first()
    SimulatedWorkloadState.objects.create(
        cluster=cluster,
        namespace=workload.namespace,
        kind=workload.kind,
        name=workload.name,
        annotations={"vpaweb.io/mode": "Initial"},
    )
    refresh(cluster, 1)
    assert len(compared) == cronjobs(cluster) + 1
    workload.refresh_from_db()
    assert workload.policy_annotations == {"vpaweb.io/mode": "Initial"}


def test_workloads_stored_without_a_digest_are_compared_once_and_given_one(
    cluster, compared, monkeypatch
):
    """As after the migration that added the column: every workload is compared,
    the equal ones get their digest alone (no change noted for the read models),
    and the pass after compares the CronJobs only."""
    workloads = Workload.objects.filter(cluster=cluster)
    before = {w.pk: w.discovered_digest for w in workloads}
    workloads.update(discovered_digest="")
    noted: list[int] = []
    real_note = changes.note

    def note(ids):
        ids = list(ids)
        noted.extend(ids)
        real_note(ids)

    monkeypatch.setattr(changes, "note", note)
    refresh(cluster, 1)

    assert len(compared) == workloads.count()
    assert {w.pk: w.discovered_digest for w in workloads.all()} == before
    # Only the CronJobs' pods moved (their runs); no other workload was noted.
    cron = set(
        workloads.filter(kind=Workload.Kind.CRON_JOB).values_list("pk", flat=True)
    )
    assert set(noted) <= cron
    compared.clear()
    refresh(cluster, 2)
    assert len(compared) == cronjobs(cluster)


def test_the_containers_of_a_skipped_workload_are_still_read_for_their_checkpoints(
    cluster, compared
):
    """A workload not compared still tells discovery a container of it whose
    checkpoint has no watermark (``Discovery.fresh``) or no row at all (an empty one
    is stored)."""
    deployments = Workload.objects.filter(
        cluster=cluster, kind=Workload.Kind.DEPLOYMENT
    ).order_by("pk")
    unwatermarked, without = deployments[0], deployments[1]
    Checkpoint.objects.filter(container__workload=unwatermarked).update(
        last_sample_at=None
    )
    gone = Container.objects.filter(workload=without, kind="regular").first()
    Checkpoint.objects.filter(container=gone).delete()
    later = NOW + timedelta(minutes=1)
    snapshot = cluster_adapter_for(cluster, now=later).discover()

    found = upsert_discovery(cluster=cluster, snapshot=snapshot, now=later)

    assert len(compared) == cronjobs(cluster)
    assert found.fresh is not None
    assert unwatermarked.pk in found.fresh and without.pk in found.fresh
    assert Checkpoint.objects.filter(container=gone, last_sample_at=None).exists()


def test_a_fleet_drawn_otherwise_moves_every_marker():
    """The simulated marker covers what the fleet is drawn from: another seed gives
    the same names other templates, and other markers."""
    one, other = build_fleet(7, 30), build_fleet(8, 30)
    assert len({w.change_marker for w in one.workloads}) == 30
    by_name = {(w.namespace, w.name): w for w in other.workloads}
    for workload in one.workloads:
        twin = by_name.get((workload.namespace, workload.name))
        if twin is not None:
            assert twin.change_marker != workload.change_marker


def _pod(name: str, version: str) -> PodInfo:
    return PodInfo(
        namespace="shop",
        name=name,
        phase="Running",
        containers=(ContainerSpec("app"),),
        resource_version=version,
    )


def test_a_kubernetes_marker_is_the_resource_versions_of_the_controller_and_pods():
    meta = {"name": "api", "namespace": "shop", "resourceVersion": "41"}
    pods = [_pod("api-b", "7"), _pod("api-a", "9")]
    marker = kube_objects.change_marker(meta, pods)
    assert marker == "41/api-a=9,api-b=7"
    # Any pod's change, a pod more or less, or the controller's change moves it.
    assert kube_objects.change_marker(meta, [_pod("api-b", "8"), pods[1]]) != marker
    assert kube_objects.change_marker(meta, pods[:1]) != marker
    assert kube_objects.change_marker({**meta, "resourceVersion": "42"}, pods) != marker
    # Without every resourceVersion there is no marker: compared every pass.
    assert kube_objects.change_marker({"name": "api"}, pods) == ""
    assert kube_objects.change_marker(meta, [*pods, _pod("api-c", "")]) == ""


def test_a_pod_and_a_controller_read_from_the_api_carry_their_resource_version():
    pod = kube_objects.pod_of(
        {
            "metadata": {"name": "api-x", "namespace": "shop", "resourceVersion": "5"},
            "spec": {"containers": [{"name": "app"}]},
            "status": {"phase": "Running"},
        }
    )
    assert pod.resource_version == "5"

    def deployment(version: str):
        return kube_objects.workload_of(
            "Deployment",
            {
                "metadata": {
                    "name": "api",
                    "namespace": "shop",
                    "resourceVersion": version,
                },
                "spec": {"template": {"spec": {"containers": [{"name": "app"}]}}},
            },
            pods=[pod],
        )

    workload = deployment("3")
    assert workload.version == "3/api-x=5"
    assert discovery.discovered_digest(workload) != ""
    assert discovery.discovered_digest(workload) != discovery.discovered_digest(
        deployment("4")
    )


def test_the_pods_of_a_skipped_workload_are_rewritten_only_when_due(
    cluster, monkeypatch
):
    """Their resources are not worked out (nor their stored ones read) unless the
    row is due its hourly rewrite (pods.TOUCH_EVERY), which they still get."""
    worked_out: list[str] = []
    real = pods_module._container_resources

    def counting(pod):
        worked_out.append(pod.name)
        return real(pod)

    monkeypatch.setattr(pods_module, "_container_resources", counting)
    stored = WorkloadPod.objects.filter(cluster=cluster)
    cron_pods = set(
        stored.filter(workload__kind=Workload.Kind.CRON_JOB).values_list(
            "name", flat=True
        )
    )
    others = stored.exclude(workload__kind=Workload.Kind.CRON_JOB)

    def rows():  # read again each time (a queryset keeps what it read)
        return {row.pk: (row.last_seen_at, row.containers) for row in others.all()}

    before = rows()
    assert before and {seen for seen, _ in before.values()} == {NOW}

    refresh(cluster, 1)
    # New CronJob runs may have started: only CronJob pods were worked out.
    cron_pods |= set(
        stored.filter(workload__kind=Workload.Kind.CRON_JOB).values_list(
            "name", flat=True
        )
    )
    assert set(worked_out) <= cron_pods
    assert rows() == before

    worked_out.clear()
    later = refresh(cluster, 61)
    assert later.status == RefreshRun.Status.SUCCEEDED
    assert rows() == {
        pk: (NOW + timedelta(minutes=61), containers)
        for pk, (_, containers) in before.items()
    }
    # Worked out for each of them: once per workload, whose pods share one tuple of
    # containers (record_pods works out each tuple once).
    pods_of: dict[int, set[str]] = {}
    for workload_id, name in others.values_list("workload_id", "name"):
        pods_of.setdefault(workload_id, set()).add(name)
    assert pods_of
    assert [w for w, names in pods_of.items() if not names & set(worked_out)] == []
