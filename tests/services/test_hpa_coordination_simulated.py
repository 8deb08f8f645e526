"""Coordinated HPA mode on the simulated cluster: the demo fleet's HPAs are discovered
like a real cluster's, and the simulated writer patches them (a JSON patch, tested as
the API server tests it) so the next discovery reads the new target back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recommender.cluster.simulated_writer import SimulatedWriter
from recommender.models import Cluster, ResizeChange, SimulatedHpaState, Workload
from recommender.services.actuation.cycle import run_cycle
from recommender.services.admission.snapshot import forget_holders
from recommender.services.connections import cluster_adapter_for, cluster_writer_for
from recommender.services.policy.changes import update_policy
from recommender.services.refresh.cycle import refresh_cluster

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
S = ResizeChange.Status


@pytest.fixture(autouse=True)
def small_fleet(settings):
    # Seed 7's 24 workloads: checkout/geo-frontend (3 replicas) has an HPA on 75 % cpu.
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 24
    settings.SIMULATION_HISTORY_DAYS = 1.0
    settings.MIN_HISTORY_HOURS = 12
    forget_holders()
    yield
    forget_holders()


@pytest.fixture
def cluster(db):
    cluster = Cluster.objects.create(
        name="sim-hpa", kind=Cluster.Kind.SIMULATED, actuation_allowed=True
    )
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    return cluster


def _hpa(cluster, now):
    snapshot = cluster_adapter_for(cluster, now=now).discover()
    (hpa,) = [
        h
        for h in snapshot.horizontal_pod_autoscalers
        if (h["namespace"], h["name"]) == ("checkout", "geo-frontend")
    ]
    return hpa


def test_the_demo_fleets_hpas_are_discovered_and_stored_as_conflicts(cluster):
    snapshot = cluster_adapter_for(cluster, now=NOW).discover()
    shapes = {
        tuple((m["resource"], m["target_type"]) for m in h["resource_metrics"])
        for h in snapshot.horizontal_pod_autoscalers
    }
    assert (("cpu", "Utilization"),) in shapes
    workload = Workload.objects.get(
        cluster=cluster, namespace="checkout", name="geo-frontend"
    )
    (conflict,) = workload.hpa_conflicts
    assert conflict["metrics"][0]["average_utilization"] == 75


def test_the_simulated_writer_patches_an_hpa_as_the_api_server_does(cluster):
    snapshot = cluster_adapter_for(cluster, now=NOW).discover()
    writer = cluster_writer_for(cluster, snapshot=snapshot, now=NOW)
    assert isinstance(writer, SimulatedWriter)
    path = "/spec/metrics/0/resource/target/averageUtilization"
    stale = writer.patch_hpa(
        namespace="checkout",
        name="geo-frontend",
        operations=[
            {"op": "test", "path": path, "value": 60},
            {"op": "replace", "path": path, "value": 120},
        ],
    )
    # A failed test: the recorded bare 422 (k8s-wire hpa/17), nothing changed.
    assert (stale.status, stale.reason, stale.body["details"]) == (422, "Invalid", {})
    assert not SimulatedHpaState.objects.exists()
    done = writer.patch_hpa(
        namespace="checkout",
        name="geo-frontend",
        operations=[
            {"op": "test", "path": path, "value": 75},
            {"op": "replace", "path": path, "value": 150},
        ],
    )
    assert done.status == 200 and done.body["metadata"]["resourceVersion"] == "2"
    later = NOW + timedelta(minutes=1)
    assert _hpa(cluster, later)["resource_metrics"][0]["average_utilization"] == 150
    invalid = writer.patch_hpa(
        namespace="checkout",
        name="geo-frontend",
        operations=[{"op": "replace", "path": path, "value": 0}],
    )
    assert invalid.status == 422
    assert invalid.body["details"]["causes"][0]["field"] == (
        "spec.metrics[0].resource.target.averageUtilization"
    )


def test_coordinated_mode_runs_on_the_demo_fleet(cluster):
    workload = Workload.objects.get(
        cluster=cluster, namespace="checkout", name="geo-frontend"
    )
    update_policy(
        workload_id=workload.pk,
        changes={
            "mode": "InPlaceOrRecreate",
            "approval": "automatic",
            "hpa_coordination": "coordinated",
        },
        actor=None,
        now=NOW,
    )
    for minute in range(4):
        run_cycle(cluster, now=NOW + timedelta(minutes=minute), holder="t")
    changes = list(ResizeChange.objects.filter(workload=workload))
    # 200m -> 350m per pod, and the HPA from 75 % to 43 %: the same 150m per pod.
    assert {c.status for c in changes} == {S.APPLIED} and len(changes) == 3
    targets = {e["after"]["averageUtilization"] for c in changes for e in c.hpa_changes}
    assert targets == {43}
    assert sorted(c.hpa_state for c in changes) == ["", "", "patched"]
    metric = _hpa(cluster, NOW + timedelta(minutes=5))["resource_metrics"][0]
    assert metric["average_utilization"] == 43
