"""Discovery resolves policies: new workloads take the rules that select them (not
Off), and a workload's vpaweb.io/* annotations reach its policy within one refresh,
a bad value ignored with its reason (simulated cluster)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recommender.models import (
    AuditEvent,
    Cluster,
    Policy,
    PolicyRule,
    RefreshRun,
    SimulatedWorkloadState,
    Workload,
)
from recommender.services.refresh.cycle import refresh_cluster
from recommender.services.refresh.discovery import upsert_discovery
from tests.k8s_fake.actuation import deployment, fake_cluster

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def small_fleet(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 24
    settings.SIMULATION_HISTORY_DAYS = 1.0


@pytest.fixture
def cluster(db):
    return Cluster.objects.create(name="sim-a", kind=Cluster.Kind.SIMULATED)


def test_new_workloads_take_the_rules_that_select_them_instead_of_off(cluster):
    PolicyRule.objects.create(
        name="payments-initial",
        namespace_selector="team=payments",
        policy_fields={"mode": "Initial", "profile": "peak-memory"},
    )

    run = refresh_cluster(cluster_id=cluster.pk, now=NOW)

    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    policies = Policy.objects.filter(workload__cluster=cluster)
    selected = policies.filter(workload__namespace="payments")
    assert selected.exists()
    assert set(selected.values_list("mode", "profile")) == {("Initial", "peak-memory")}
    assert {p.provenance["mode"]["name"] for p in selected} == {"payments-initial"}
    others = policies.exclude(workload__namespace="payments")
    assert set(others.values_list("mode", flat=True)) == {"Off"}
    assert {p.provenance["mode"]["source"] for p in others} == {"default"}


def test_an_annotation_reaches_the_policy_within_one_refresh_and_a_bad_one_is_shown(
    cluster,
):
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    workload = Workload.objects.filter(cluster=cluster, kind="Deployment").first()
    SimulatedWorkloadState.objects.create(
        cluster=cluster,
        namespace=workload.namespace,
        kind=workload.kind,
        name=workload.name,
        annotations={
            "vpaweb.io/mode": "Initial",
            "vpaweb.io/approval": "sometimes",
            "other.io/ignored": "x",
        },
    )

    run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))

    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    policy = Policy.objects.get(workload=workload)
    assert policy.mode == "Initial"
    assert policy.provenance["mode"] == {
        "source": "annotation",
        "name": "vpaweb.io/mode",
    }
    assert policy.approval == "manual"
    assert policy.provenance["approval"] == {"source": "default"}
    [ignored] = policy.ignored_annotations
    assert ignored["annotation"] == "vpaweb.io/approval"
    assert ignored["value"] == "sometimes"
    assert "must be one of manual, automatic" in ignored["reason"]
    event = AuditEvent.objects.get(workload=workload, action="policy.update")
    assert "from the workload's annotation vpaweb.io/mode" in event.message


def test_an_operators_own_mode_wins_over_the_annotation(cluster):
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    workload = Workload.objects.filter(cluster=cluster, kind="Deployment").first()
    Policy.objects.filter(workload=workload).update(own_fields=["mode"])
    SimulatedWorkloadState.objects.create(
        cluster=cluster,
        namespace=workload.namespace,
        kind=workload.kind,
        name=workload.name,
        annotations={"vpaweb.io/mode": "Recreate"},
    )

    refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))

    policy = Policy.objects.get(workload=workload)
    assert (policy.mode, policy.provenance["mode"]) == ("Off", {"source": "own"})


def test_the_kubernetes_adapter_reads_a_deployments_annotations(db, tmp_path):
    # A Deployment as tests/k8s_fake/actuation.deployment shapes it (the recorded
    # eviction/05 and resize/01 objects), with metadata.annotations as kubectl
    # annotate sets them (ObjectMeta.annotations, as on the recorded pods).
    objects = deployment("checkout")
    objects[0]["metadata"]["annotations"] = {
        "vpaweb.io/mode": "InPlaceOrRecreate",
        "vpaweb.io/profile": "no-such-profile",
        "deployment.kubernetes.io/revision": "3",
    }
    fake = fake_cluster(objects, tmp_path)
    try:
        snapshot = fake.adapter.discover()
    finally:
        fake.close()
    stored = Cluster.objects.create(name="fake", kind=Cluster.Kind.KUBERNETES)

    upsert_discovery(cluster=stored, snapshot=snapshot, now=NOW)

    workload = Workload.objects.get(cluster=stored, kind="Deployment")
    assert workload.policy_annotations == {
        "vpaweb.io/mode": "InPlaceOrRecreate",
        "vpaweb.io/profile": "no-such-profile",
    }
    policy = Policy.objects.get(workload=workload)
    assert (policy.mode, policy.profile) == ("InPlaceOrRecreate", "vpa")
    [ignored] = policy.ignored_annotations
    assert ignored["annotation"] == "vpaweb.io/profile"
    assert "no-such-profile" in ignored["reason"]
