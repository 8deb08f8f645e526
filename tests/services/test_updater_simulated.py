"""The whole loop on the simulated cluster: refresh, switch a workload to
InPlaceOrRecreate or Recreate, approve, and see the pods' requests change on the next
discovery (an evicted pod is recreated through the admission path)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recommender.models import AdmissionCount, Cluster, ResizeChange, Workload
from recommender.roles import Role
from recommender.services.actuation import approvals
from recommender.services.actuation.cycle import run_cycle
from recommender.services.admission import counters
from recommender.services.admission.snapshot import forget_holders
from recommender.services.connections import cluster_adapter_for, cluster_writer_for
from recommender.services.policy.changes import update_policy
from recommender.services.refresh.cycle import refresh_cluster
from tests.factories import make_user
from tests.web.conftest import client_for

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
S = ResizeChange.Status


@pytest.fixture(autouse=True)
def small_fleet(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 24
    settings.SIMULATION_HISTORY_DAYS = 1.0
    # A day of simulated samples spans a minute less than 24 h: enough here.
    settings.MIN_HISTORY_HOURS = 12


@pytest.fixture
def cluster(db):
    cluster = Cluster.objects.create(
        name="sim-a", kind=Cluster.Kind.SIMULATED, actuation_allowed=True
    )
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


@pytest.fixture(autouse=True)
def fresh_admission_cache():
    # The webhook's cache is per process and keyed by cluster name.
    forget_holders()
    yield
    forget_holders()


def switch(workload, mode):
    """As an operator does (the webhook's cache learns of it at once)."""
    update_policy(workload_id=workload.pk, changes={"mode": mode}, actor=None, now=NOW)


def a_workload_needing_changes(cluster, mode, kinds=("Deployment", "StatefulSet")):
    """A replicated workload whose pods the updater wants to change."""
    for workload in Workload.objects.filter(
        cluster=cluster, kind__in=kinds, replicas__gte=2
    ).order_by("name"):
        switch(workload, mode)
        report = run_cycle(cluster, now=NOW, holder="t")
        if report.proposed:
            return workload
        switch(workload, "Off")
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


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet"])
def test_an_evicted_pod_is_recreated_through_the_admission_webhook(cluster, kind):
    workload = a_workload_needing_changes(cluster, "Recreate", kinds=(kind,))
    change = max(
        ResizeChange.objects.filter(workload=workload), key=lambda c: c.priority
    )
    approvals.approve_change(change_id=change.pk, approved_by=None, now=NOW)
    counters.flush_counts()
    before = sum(AdmissionCount.objects.values_list("count", flat=True))

    later = NOW + timedelta(minutes=1)
    assert run_cycle(cluster, now=later, holder="t").evicted == 1
    counters.flush_counts()
    # The new pod went through the webhook's service: one more admission, patched.
    assert sum(AdmissionCount.objects.values_list("count", flat=True)) == before + 1
    assert AdmissionCount.objects.filter(outcome="patched").exists()
    pod = pods_of(cluster, workload, later)[change.pod]
    assert pod.uid != change.pod_uid
    # The webhook's annotations say what it set and why, as on a real pod.
    assert "vpaweb.io/updates" in pod.annotations

    # The webhook decides, not the updater: back in Off the next recreated pod keeps
    # its template's requests (the webhook leaves pods of Off workloads alone).
    template = {
        c.name: c.requests
        for c in next(
            w
            for w in cluster_adapter_for(cluster, now=later).discover().workloads
            if (w.kind, w.name) == (workload.kind, workload.name)
        ).containers
    }
    other = next(
        c
        for c in ResizeChange.objects.filter(workload=workload, status=S.PROPOSED)
        if c.pod != change.pod
    )
    approvals.approve_change(change_id=other.pk, approved_by=None, now=later)
    switch(workload, "Off")  # withdraws approved changes: apply one by hand
    snapshot = cluster_adapter_for(cluster, now=later).discover()
    writer = cluster_writer_for(cluster, snapshot=snapshot, now=later)
    assert writer.evict_pod(namespace=workload.namespace, name=other.pod).status == 201
    pod = pods_of(cluster, workload, later)[other.pod]
    assert {c.name: c.requests for c in pod.containers} == template
    assert "vpaweb.io/updates" not in pod.annotations


@pytest.mark.parametrize("mode", ["InPlaceOrRecreate", "Recreate"])
def test_pods_below_min_replicas_get_no_change_and_the_page_says_why(cluster, mode):
    # A workload whose pods the updater wants to change, then its policy asks for
    # more replicas than it has: upstream never disrupts such a group.
    workload = a_workload_needing_changes(cluster, mode)
    ResizeChange.objects.filter(workload=workload).delete()
    update_policy(
        workload_id=workload.pk,
        changes={"min_replicas": workload.replicas + 1},
        actor=None,
        now=NOW,
    )
    report = run_cycle(cluster, now=NOW + timedelta(minutes=1), holder="t")
    assert report.proposed == 0
    assert not ResizeChange.objects.filter(workload=workload).exists()

    page = (
        client_for(make_user("vera", Role.VIEWER))
        .get(f"/workloads/{workload.pk}/")
        .content.decode()
    )
    assert (
        f"{workload.replicas} replicas: below min_replicas {workload.replicas + 1}; "
        "the updater never disrupts it"
    ) in page


def test_a_single_replica_workload_gets_no_change(cluster, settings):
    single = Workload.objects.filter(
        cluster=cluster, kind="Deployment", replicas=1
    ).first()
    if single is None:
        pytest.fail("the simulated fleet has no single-replica Deployment")
    switch(single, "InPlaceOrRecreate")
    run_cycle(cluster, now=NOW, holder="t")
    assert not ResizeChange.objects.filter(workload=single).exists()
    # With min_replicas 1 the same workload is proposed a change: the rule, not
    # the recommendation, held it back.
    settings.UPDATER_MIN_REPLICAS = 1
    run_cycle(cluster, now=NOW + timedelta(minutes=1), holder="t")
    assert ResizeChange.objects.filter(workload=single).exists()
