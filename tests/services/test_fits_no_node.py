"""A recommendation no node of the cluster can hold is never written: the one advice
path (services/advice/advise.py) leaves the pod as it is and says why, so the webhook
writes nothing, the updater proposes nothing, and the workload page and rightsize's
notes flag it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from recommender.models import Container, NodePool, ResizeChange, Workload
from recommender.services.actuation.cycle import run_cycle
from recommender.services.admission.decision import PATCHED
from recommender.services.admission.snapshot import forget_holders
from recommender.services.policy.changes import update_policy
from recommender.services.refresh.cycle import refresh_cluster
from tests.factories import make_cluster, make_recommendation
from tests.services.test_admission import applied, decide, recorded, workload_with
from tests.web.conftest import client_for

pytestmark = pytest.mark.django_db
GIB = 2**30
MI = 2**20
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def nodes_of(cluster, *allocatables: tuple[int, int]) -> None:
    """The cluster's pools as the node-pools step stores them: one pool whose
    largest nodes have these (cpu millicores, memory bytes) allocatable."""
    NodePool.objects.create(
        cluster=cluster,
        name="m5.xlarge",
        nodes=3,
        node_cpu_millicores=allocatables[0][0],
        node_memory_bytes=allocatables[0][1],
        node_pods=58,
        node_allocatables=[list(a) for a in allocatables],
        pods=10,
        nodes_needed_now=2,
        nodes_needed_after=2,
        node_monthly_cost=100.0,
        price_source="default",
        computed_at=NOW,
    )


@pytest.fixture
def cluster():
    forget_holders()
    yield make_cluster("wire")
    forget_holders()


def test_the_webhook_writes_no_request_no_node_can_hold(cluster):
    nodes_of(cluster, (3920, 15 * GIB))
    workload_with(
        cluster, "hooked", "wire-hook", {"app": (6000, 300 * MI), "side": (20, 32 * MI)}
    )
    review = recorded("a-replicaset-pod")

    decision = decide(cluster, review)

    assert decision.outcome != PATCHED
    assert "fits no node of the cluster" in decision.reason
    assert "3920m cpu" in decision.reason


def test_the_pods_sum_counts_and_a_request_a_node_holds_is_written(cluster):
    nodes_of(cluster, (3920, 15 * GIB), (2000, 64 * GIB))
    # 3 cores and 40 GiB: each fits one kind of node, the pair fits neither.
    workload_with(
        cluster, "hooked", "wire-hook", {"app": (3000, 40 * GIB), "side": (20, MI)}
    )
    assert decide(cluster, recorded("a-replicaset-pod")).outcome != PATCHED
    Container.objects.filter(workload__name="hooked", name="app").delete()
    forget_holders()
    workload = Workload.objects.get(name="hooked")
    app = Container.objects.create(workload=workload, name="app", position=0)
    make_recommendation(app, cpu_millicores=1500, memory_bytes=40 * GIB)
    review = recorded("a-replicaset-pod")
    decision = decide(cluster, review)
    assert decision.outcome == PATCHED, decision.reason
    pod = applied(review, decision)
    assert pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1500m"


def test_the_page_flags_it_and_offers_no_patch(cluster, admin_user):
    nodes_of(cluster, (3920, 15 * GIB))
    workload = workload_with(cluster, "big", "shop", {"app": (6000, GIB)})

    page = client_for(admin_user).get(f"/workloads/{workload.pk}/").content.decode()

    assert 'data-testid="fits-no-node"' in page
    assert "fits no node of the cluster" in page
    assert 'data-testid="kubectl-patch"' not in page


def test_the_updater_proposes_no_resize_no_node_can_hold(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 24
    settings.SIMULATION_HISTORY_DAYS = 1.0
    settings.MIN_HISTORY_HOURS = 12
    forget_holders()
    cluster = make_cluster("sim-a")
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    largest = max(
        cpu
        for shapes in NodePool.objects.values_list("node_allocatables", flat=True)
        for cpu, _ in shapes
    )
    workload = (
        Workload.objects.filter(cluster=cluster, kind="Deployment", replicas__gte=2)
        .order_by("name")
        .first()
    )
    for container in workload.containers.exclude(kind="init"):
        rec = container.latest_recommendation
        rec.target_cpu_millicores = largest + 1000
        rec.save(update_fields=["target_cpu_millicores"])
    update_policy(
        workload_id=workload.pk,
        changes={"mode": "InPlaceOrRecreate"},
        actor=None,
        now=NOW,
    )

    run_cycle(cluster, now=NOW, holder="t")

    assert not ResizeChange.objects.filter(workload=workload).exists()
    forget_holders()
