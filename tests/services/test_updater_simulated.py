"""The whole loop on the simulated cluster: refresh, switch a workload to
InPlaceOrRecreate or Recreate, approve, and see the pods' requests change on the next
discovery (an evicted pod is recreated through the admission path)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recommender.models import Cluster, Policy, ResizeChange, Workload
from recommender.services.actuation import approvals
from recommender.services.actuation.apply import run_cycle
from recommender.services.refresh.adapters import cluster_adapter_for
from recommender.services.refresh.cycle import refresh_cluster

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
S = ResizeChange.Status


@pytest.fixture(autouse=True)
def small_fleet(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 24
    settings.SIMULATION_HISTORY_DAYS = 1.0


@pytest.fixture
def cluster(db):
    cluster = Cluster.objects.create(name="sim-a", kind=Cluster.Kind.SIMULATED)
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    return cluster


def pods_of(cluster, workload, now):
    snapshot = cluster_adapter_for(cluster, now=now).discover()
    info = next(
        w
        for w in snapshot.workloads
        if (w.kind, w.namespace, w.name)
        == (workload.kind, workload.namespace, workload.name)
    )
    return {p.name: p for p in info.pods}


def a_workload_needing_changes(cluster, mode):
    """A replicated workload whose pods the updater wants to change."""
    for workload in Workload.objects.filter(
        cluster=cluster, kind__in=["Deployment", "StatefulSet"], replicas__gte=2
    ).order_by("name"):
        Policy.objects.filter(workload=workload).update(mode=mode)
        report = run_cycle(cluster, now=NOW, holder="t")
        if report.proposed:
            return workload
        Policy.objects.filter(workload=workload).update(mode="Off")
    pytest.fail("no simulated workload needs a change")


@pytest.mark.parametrize(
    ("mode", "method"), [("InPlaceOrRecreate", "in-place"), ("Recreate", "eviction")]
)
def test_switch_approve_and_see_the_requests_change(cluster, mode, method):
    workload = a_workload_needing_changes(cluster, mode)
    changes = list(ResizeChange.objects.filter(workload=workload))
    assert changes and {c.status for c in changes} == {S.PROPOSED}
    assert {c.method for c in changes} == {method}
    first = max(changes, key=lambda c: c.priority)
    approvals.approve_change(change_id=first.pk, approved_by=None, now=NOW)

    later = NOW + timedelta(minutes=1)
    report = run_cycle(cluster, now=later, holder="t")
    assert (report.resized, report.evicted) == (
        (1, 0) if method == "in-place" else (0, 1)
    )
    pod = pods_of(cluster, workload, later)[first.pod]
    requests = {c.name: c.requests.to_dict() for c in pod.containers}
    for name, after in first.resources_after.items():
        assert requests[name] == after["requests"]
    if method == "eviction":
        assert pod.uid != first.pod_uid and pod.start_time == later  # recreated

    report = run_cycle(cluster, now=later + timedelta(minutes=1), holder="t")
    first.refresh_from_db()
    assert first.status == S.APPLIED and report.applied == 1
    # The others still wait for an operator: nothing else was written.
    others = ResizeChange.objects.filter(workload=workload).exclude(pk=first.pk)
    assert set(others.values_list("status", flat=True)) <= {S.PROPOSED}
