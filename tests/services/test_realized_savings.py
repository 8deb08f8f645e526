"""Realized vs potential savings: a verified change records the requests it removed;
from then on the overview, the rollups and the trend count its savings as realized,
and the potential savings shrink by the same amount, until the workload is deleted
or changed back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recommender.models import Cluster, Container, ResizeChange, Workload, WorkloadPod
from recommender.services.actuation import approvals
from recommender.services.actuation.cycle import requests_removed, run_cycle
from recommender.services.admission.snapshot import forget_holders
from recommender.services.connections import cluster_adapter_for
from recommender.services.dashboard.overview import fleet_overview
from recommender.services.policy.changes import update_policy
from recommender.services.readmodels import namespace_totals
from recommender.services.readmodels.provisioning import Prices
from recommender.services.readmodels.rollups import rollup
from recommender.services.readmodels.savings_trend import record_snapshot, savings_trend
from recommender.services.refresh.cycle import refresh_cluster
from recommender.services.refresh.discovery import upsert_discovery

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
S = ResizeChange.Status
PRICES = Prices(per_core_hour=0.03, per_gib_hour=0.004)


@pytest.fixture(autouse=True)
def small_fleet(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 24
    settings.SIMULATION_HISTORY_DAYS = 1.0
    # A day of simulated samples spans a minute less than 24 h: enough here.
    settings.MIN_HISTORY_HOURS = 12
    forget_holders()
    yield
    forget_holders()


def test_requests_removed_sums_the_containers_and_signs_an_addition():
    before = {
        "app": {"requests": {"cpu": 500, "memory": 512}},
        "side": {"requests": {"cpu": 100, "memory": 64}},
    }
    after = {"app": {"requests": {"cpu": 250}}, "side": {"requests": {"memory": 96}}}

    assert requests_removed(before, after) == {
        "cpu_millicores": 250,
        "memory_bytes": -32,
    }


def test_an_applied_change_moves_its_savings_from_potential_to_realized():
    cluster = Cluster.objects.create(
        name="sim-a", kind=Cluster.Kind.SIMULATED, actuation_allowed=True
    )
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    workload = None
    for candidate in Workload.objects.filter(
        cluster=cluster, kind="Deployment", replicas__gte=2
    ).order_by("name"):
        update_policy(
            workload_id=candidate.pk,
            changes={"mode": "InPlaceOrRecreate"},
            actor=None,
            now=NOW,
        )
        if run_cycle(cluster, now=NOW, holder="t").proposed:
            workload = candidate
            break
        update_policy(
            workload_id=candidate.pk, changes={"mode": "Off"}, actor=None, now=NOW
        )
    assert workload is not None
    before = fleet_overview(now=NOW, prices=PRICES).fleet
    assert before.realized_savings == 0
    for change in ResizeChange.objects.filter(workload=workload, status=S.PROPOSED):
        approvals.approve_change(change_id=change.pk, approved_by=None, now=NOW)

    # Resized in place, a replica group's tolerance at a time, and verified.
    verified = NOW
    for _ in range(8):
        verified += timedelta(minutes=1)
        run_cycle(cluster, now=verified, holder="t")
        if not ResizeChange.objects.filter(workload=workload).exclude(status=S.APPLIED):
            break
    changes = list(ResizeChange.objects.filter(workload=workload))
    assert {c.status for c in changes} == {S.APPLIED}
    assert all(c.requests_removed for c in changes)
    # Discovery reads the resized pods: the current requests are the new ones.
    snapshot = cluster_adapter_for(cluster, now=verified).discover()
    upsert_discovery(cluster=cluster, snapshot=snapshot, now=verified)
    namespace_totals.store(cluster=cluster, now=verified)  # as the refresh does

    after = fleet_overview(now=verified, prices=PRICES).fleet
    realized = sum(
        PRICES.monthly(
            cpu_millicores=c.requests_removed["cpu_millicores"],
            memory_bytes=c.requests_removed["memory_bytes"],
        )
        for c in changes
    )
    assert after.realized_savings == pytest.approx(realized)
    assert realized > 0
    # Potential shrinks by what is now realized.
    assert before.savings - after.savings == pytest.approx(realized, rel=1e-6)
    # The rollups and the trend say the same.
    assert rollup(
        by="cluster", now=verified, prices=PRICES
    ).total.realized_savings == pytest.approx(realized)
    next_hour = NOW + timedelta(hours=1)  # the refresh recorded NOW's hour
    record_snapshot(cluster=cluster, now=next_hour, prices=PRICES)
    first, second = savings_trend(now=next_hour, days=7).points
    assert first.realized_savings_monthly == 0
    assert second.realized_savings_monthly == pytest.approx(realized)

    # Changed back (the pods carry the old requests again): it no longer counts.
    for change in changes:
        for name, values in change.resources_before.items():
            Container.objects.filter(workload=workload, name=name).update(
                request_cpu_millicores=values["requests"].get("cpu"),
                request_memory_bytes=values["requests"].get("memory"),
            )
        WorkloadPod.objects.filter(workload=workload, name=change.pod).update(
            containers=change.resources_before
        )
    assert fleet_overview(now=verified, prices=PRICES).fleet.realized_savings == 0

    # Deleted: it stops as well.
    for change in changes:
        for name, values in change.resources_after.items():
            Container.objects.filter(workload=workload, name=name).update(
                request_cpu_millicores=values["requests"].get("cpu"),
                request_memory_bytes=values["requests"].get("memory"),
            )
        WorkloadPod.objects.filter(workload=workload, name=change.pod).update(
            containers=change.resources_after
        )
    assert fleet_overview(now=verified, prices=PRICES).fleet.realized_savings > 0
    Workload.objects.filter(pk=workload.pk).update(is_active=False)
    assert fleet_overview(now=verified, prices=PRICES).fleet.realized_savings == 0


def test_one_pod_resized_moves_only_its_share_from_potential_to_realized():
    cluster = Cluster.objects.create(
        name="sim-a", kind=Cluster.Kind.SIMULATED, actuation_allowed=True
    )
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    workload = None
    for candidate in Workload.objects.filter(
        cluster=cluster, kind="Deployment", replicas__gte=2
    ).order_by("name"):
        update_policy(
            workload_id=candidate.pk,
            changes={"mode": "InPlaceOrRecreate"},
            actor=None,
            now=NOW,
        )
        if run_cycle(cluster, now=NOW, holder="t").proposed:
            workload = candidate
            break
        update_policy(
            workload_id=candidate.pk, changes={"mode": "Off"}, actor=None, now=NOW
        )
    assert workload is not None
    before = fleet_overview(now=NOW, prices=PRICES).fleet
    # Only the last pod by name (never the one whose values stand for the
    # container's request: the first running pod by name) is approved.
    change = ResizeChange.objects.filter(workload=workload, status=S.PROPOSED).latest(
        "pod"
    )
    approvals.approve_change(change_id=change.pk, approved_by=None, now=NOW)
    verified = NOW
    for _ in range(8):
        verified += timedelta(minutes=1)
        run_cycle(cluster, now=verified, holder="t")
        change.refresh_from_db()
        if change.verified_at is not None:
            break
    assert change.status == S.APPLIED and change.requests_removed
    assert ResizeChange.objects.filter(workload=workload, status=S.APPLIED).count() == 1
    # Discovery reads the pods, one of them resized; the refresh stores the totals.
    snapshot = cluster_adapter_for(cluster, now=verified).discover()
    upsert_discovery(cluster=cluster, snapshot=snapshot, now=verified)
    namespace_totals.store(cluster=cluster, now=verified)

    share = PRICES.monthly(
        cpu_millicores=change.requests_removed["cpu_millicores"],
        memory_bytes=change.requests_removed["memory_bytes"],
    )
    after = fleet_overview(now=verified, prices=PRICES).fleet
    assert share > 0
    assert after.realized_savings == pytest.approx(share)
    # The pod's share moved from potential to realized: counted once, not twice
    # (the other pods still carry the old requests).
    assert after.savings + after.realized_savings == pytest.approx(before.savings)
    total = rollup(by="namespace", now=verified, prices=PRICES).total
    assert total.savings == pytest.approx(after.savings)
    assert total.realized_savings == pytest.approx(share)


def test_one_pod_of_six_resized_in_place_counts_that_pods_share():
    from recommender.services.readmodels.realized import realized_savings
    from tests.factories import make_cluster, make_recommendation, make_workload

    cluster = make_cluster("prod")
    workload = make_workload(
        cluster,
        "web",
        namespace="shop",
        replicas=6,
        containers={
            "app": {"request_cpu_millicores": 500, "request_memory_bytes": 256 * 2**20}
        },
    )
    make_recommendation(workload.containers.get(), cpu_millicores=203)
    template = {"requests": {"cpu": 500, "memory": 256 * 2**20}}
    resized = {"requests": {"cpu": 203, "memory": 256 * 2**20}}
    for n in range(6):
        WorkloadPod.objects.create(
            cluster=cluster,
            workload=workload,
            namespace="shop",
            name=f"web-{n}",
            containers={"app": resized if n == 3 else template},
            last_seen_at=NOW,
        )
    ResizeChange.objects.create(
        workload=workload,
        pod="web-3",
        status=S.APPLIED,
        verified_at=NOW,
        resources_before={"app": template},
        resources_after={"app": resized},
        requests_removed={"cpu_millicores": 297, "memory_bytes": 0},
    )

    # The container still carries the template's request (five pods do); the pod
    # resized in place holds its change: its share is realized.
    share = PRICES.monthly(cpu_millicores=297, memory_bytes=0)
    assert realized_savings(prices=PRICES) == {workload.pk: pytest.approx(share)}

    # Resized back (the pod carries the template's request again): nothing.
    WorkloadPod.objects.filter(name="web-3").update(containers={"app": template})
    assert realized_savings(prices=PRICES) == {}

    # The pod gone (replaced by a new one from the template): nothing either.
    WorkloadPod.objects.filter(name="web-3").update(
        containers={"app": resized}, last_seen_at=NOW - timedelta(hours=3)
    )
    assert realized_savings(prices=PRICES) == {}


def test_the_workload_page_shows_the_pods_real_requests(client, django_user_model):
    from recommender.models import WorkloadPod
    from recommender.roles import Role, grant_role
    from tests.factories import make_cluster, make_workload

    cluster = make_cluster("prod")
    workload = make_workload(
        cluster,
        "web",
        namespace="shop",
        replicas=6,
        containers={
            "app": {"request_cpu_millicores": 500, "request_memory_bytes": 256 * 2**20}
        },
    )
    for n in range(6):
        cpu = 203 if n == 3 else 500
        WorkloadPod.objects.create(
            cluster=cluster,
            workload=workload,
            namespace="shop",
            name=f"web-{n}",
            containers={"app": {"requests": {"cpu": cpu, "memory": 256 * 2**20}}},
            last_seen_at=NOW,
        )
    user = django_user_model.objects.create_user("viewer", password="x")
    grant_role(user, Role.VIEWER)
    client.force_login(user)
    page = client.get(f"/workloads/{workload.pk}/").content.decode()
    assert "5 pods at 500m CPU, 256 MiB; 1 pod at 203m CPU, 256 MiB." in page


def test_the_pods_mean_request_counts_the_running_pods_first():
    from recommender.cluster.base import ContainerSpec, PodInfo
    from recommender.engine.resources import Resources
    from recommender.services.refresh.pods import pods_requests

    def pod(name, phase, cpu, memory=None):
        return PodInfo(
            namespace="shop",
            name=name,
            phase=phase,
            containers=(ContainerSpec("app", requests=Resources(cpu, memory)),),
        )

    running = [pod(f"web-{n}", "Running", 203 if n == 3 else 500) for n in range(6)]
    # A pending pod from an older template is not counted beside running ones.
    assert pods_requests([*running, pod("web-new", "Pending", 900)]) == {
        "app": ((5 * 500 + 203) / 6, None)
    }
    # Between a CronJob's runs: the pods that finished.
    done = [pod("job-a", "Succeeded", 100, 64), pod("job-b", "Succeeded", 300)]
    assert pods_requests(done) == {"app": (200.0, 64.0)}
    assert pods_requests([]) == {}
