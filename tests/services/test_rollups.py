"""Rollups by cluster, namespace, label and kind: the workloads' own savings and
statuses summed, and the overview's totals when everything is one group."""

from __future__ import annotations

import pytest
from django.utils import timezone

from recommender.errors import InvalidInput
from recommender.models import Container, Workload, container_facts, workload_facts
from recommender.services.dashboard.overview import fleet_overview
from recommender.services.readmodels.provisioning import Prices, risk_rules
from recommender.services.readmodels.rollups import rollup
from tests.factories import make_cluster, make_recommendation, make_workload

MI = 2**20
PRICES = Prices(per_core_hour=0.03, per_gib_hour=0.004)


def _workload(
    cluster,
    name,
    *,
    namespace,
    team=None,
    kind="Deployment",
    replicas=2,
    cpu=1000,
    memory=1024 * MI,
    target=(250, 300 * MI),
):
    workload = make_workload(
        cluster,
        name,
        namespace=namespace,
        kind=kind,
        replicas=replicas,
        containers={
            "app": {"request_cpu_millicores": cpu, "request_memory_bytes": memory},
            "init": {"request_cpu_millicores": 50},
        },
    )
    Container.objects.filter(workload=workload, name="init").update(kind="init")
    if team is not None:
        workload.labels = {"app": name, "team": team}
        workload.save(update_fields=["labels"])
    if target is not None:
        make_recommendation(
            workload.containers.get(name="app"),
            cpu_millicores=target[0],
            memory_bytes=target[1],
        )
    return workload


@pytest.fixture
def fleet(db):
    prod, dev = make_cluster("prod"), make_cluster("dev")
    return [
        _workload(prod, "checkout", namespace="shop", team="storefront"),
        _workload(prod, "cart", namespace="shop", team="storefront", replicas=4),
        # Under-provisioned: a negative saving.
        _workload(
            prod,
            "ledger",
            namespace="pay",
            team="payments",
            cpu=100,
            memory=128 * MI,
            target=(400, 512 * MI),
        ),
        _workload(dev, "checkout", namespace="shop", team="storefront"),
        _workload(dev, "agent", namespace="ops", kind="DaemonSet", replicas=5),
        _workload(
            dev, "nightly", namespace="ops", kind="CronJob", target=None, replicas=1
        ),
    ]


def _expected(workloads):
    """Savings and headline statuses of the workloads by the Python form of the rule
    (recommender/models/provisioning.py)."""
    savings, statuses = 0.0, {}
    rules = risk_rules(timezone.now())
    for workload in workloads:
        facts = workload_facts(
            container_facts(
                c,
                recent_ooms=c.oom_kills.filter(
                    occurred_at__gte=rules.oom_since
                ).count(),
                replicas=workload.replicas,
                prices=PRICES,
                rules=rules,
            )
            for c in Workload.objects.get(pk=workload.pk).containers.all()
            if c.kind != "init"
        )
        savings += facts.savings
        statuses[facts.status] = statuses.get(facts.status, 0) + 1
    return savings, statuses


def test_by_label_sums_each_teams_workloads_and_keeps_the_unlabelled(fleet):
    result = rollup(by="label", key="team", now=timezone.now(), prices=PRICES)

    groups = {g.name: g for g in result.groups}
    assert set(groups) == {"storefront", "payments", ""}
    for team, members in (
        ("storefront", [fleet[0], fleet[1], fleet[3]]),
        ("payments", [fleet[2]]),
        ("", [fleet[4], fleet[5]]),
    ):
        savings, statuses = _expected(members)
        assert groups[team].workloads == len(members)
        assert groups[team].savings == pytest.approx(savings)
        assert {k: v for k, v in groups[team].statuses.items() if v} == statuses
    assert groups["payments"].savings < 0
    # Largest savings first.
    assert [g.savings for g in result.groups] == sorted(
        (g.savings for g in result.groups), reverse=True
    )


def test_amounts_count_every_replica_and_leave_init_containers_out(fleet):
    result = rollup(by="kind", now=timezone.now(), prices=PRICES)

    daemonsets = next(g for g in result.groups if g.name == "DaemonSet")
    # 5 pods (one per node) of 1000m requested, 250m recommended; the init
    # container's 50m is not counted.
    assert daemonsets.requested_cpu_millicores == 5 * 1000
    assert daemonsets.recommended_cpu_millicores == 5 * 250
    cronjobs = next(g for g in result.groups if g.name == "CronJob")
    assert cronjobs.covered == 0
    assert cronjobs.requested_cpu_millicores == 1000
    assert cronjobs.covered_requested_cpu_millicores == 0
    assert cronjobs.statuses["no-data"] == 1


def test_the_total_is_the_overviews_fleet(fleet):
    now = timezone.now()
    fleet_totals = fleet_overview(now=now, prices=PRICES).fleet

    for by in ("cluster", "namespace", "label", "kind"):
        total = rollup(by=by, now=now, prices=PRICES).total
        assert total.savings == pytest.approx(fleet_totals.savings)
        assert total.requested_cpu_millicores == fleet_totals.requested_cpu_millicores
        assert total.requested_memory_bytes == fleet_totals.requested_memory_bytes
        assert total.recommended_memory_bytes == fleet_totals.recommended_memory_bytes
        assert total.containers == fleet_totals.containers
        assert total.covered == fleet_totals.covered


def test_namespaces_are_per_cluster_and_a_cluster_filter_narrows(fleet):
    now = timezone.now()
    result = rollup(by="namespace", now=now, prices=PRICES)
    assert sorted((g.cluster, g.name) for g in result.groups) == [
        ("dev", "ops"),
        ("dev", "shop"),
        ("prod", "pay"),
        ("prod", "shop"),
    ]
    only_dev = rollup(by="namespace", cluster="dev", now=now, prices=PRICES)
    assert {g.cluster for g in only_dev.groups} == {"dev"}
    assert only_dev.total.workloads == 3


def test_another_label_key(fleet):
    Workload.objects.filter(name="ledger").update(
        labels={"app.kubernetes.io/part-of": "money"}
    )
    result = rollup(
        by="label", key="app.kubernetes.io/part-of", now=timezone.now(), prices=PRICES
    )
    assert {g.name: g.workloads for g in result.groups} == {"money": 1, "": 5}


def test_the_default_label_key_comes_from_the_settings(fleet, settings):
    settings.ROLLUP_LABEL_KEY = "app"
    result = rollup(by="label", now=timezone.now(), prices=PRICES)
    assert result.key == "app"
    assert {g.name for g in result.groups} >= {"checkout", "cart", "ledger"}


@pytest.mark.parametrize(
    ("by", "key", "field"),
    [
        ("team", "", "by"),
        ("", "", "by"),
        ("label", "a b", "key"),
        ("label", "team=x", "key"),
    ],
)
def test_unknown_groupings_and_bad_keys_are_refused(db, by, key, field):
    with pytest.raises(InvalidInput) as caught:
        rollup(by=by, key=key, now=timezone.now(), prices=PRICES)
    assert caught.value.fields == {field: [caught.value.message]}
