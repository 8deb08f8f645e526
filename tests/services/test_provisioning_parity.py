"""The provisioning rule holds in Python and in SQL alike (review finding 17): facts,
savings, risk and the headline status per container and per workload, and the mode
filter (no policy row = Off) shared by the dashboard list and the API."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from recommender.models import (
    Cluster,
    Container,
    OomKill,
    Policy,
    Recommendation,
    RiskRules,
    Workload,
    container_facts,
    workload_facts,
)
from recommender.roles import Role
from recommender.services.dashboard.insights import WorkloadFilters, list_workloads
from recommender.services.readmodels.provisioning import Prices
from tests.factories import make_cluster, make_user, make_workload

pytestmark = pytest.mark.django_db

PRICES = Prices(per_core_hour=0.03, per_gib_hour=0.004)
MI = 2**20
# Requests around bounds lower 80 / upper 120 (cpu m) and 80/120 MiB: absent, far
# below, just below (within the 10 % margin), within, above.
CPU_REQUESTS = (None, 50, 75, 100, 150)
MEMORY_REQUESTS = (None, 50 * MI, 75 * MI, 100 * MI, 150 * MI)
RECOMMENDATIONS = {
    "none": None,
    "both": dict(cpu=(80, 100, 120), memory=(80 * MI, 100 * MI, 120 * MI)),
    "cpu only": dict(cpu=(80, 100, 120), memory=(None, None, None)),
    "memory only": dict(cpu=(None, None, None), memory=(80 * MI, 100 * MI, 120 * MI)),
    # A row with bounds but no target (the engine had no target to give).
    "bounds, no target": dict(cpu=(80, None, 120), memory=(80 * MI, None, 120 * MI)),
    # Lower bounds raised by the pod minimum: usage alone gave 40m / 40 MiB.
    "pod minimum": dict(
        cpu=(80, 100, 120), memory=(80 * MI, 100 * MI, 120 * MI), before=(40, 40 * MI)
    ),
}


def _recommendation(container: Container, shape: dict) -> Recommendation:
    """The (unsaved) recommendation of ``shape`` for ``container``."""
    (low_c, target_c, up_c), (low_m, target_m, up_m) = shape["cpu"], shape["memory"]
    explanation = {}
    if "before" in shape:
        explanation = {
            "resources": {
                name: {"lower_bound": {"after_confidence": value}}
                for name, value in zip(("cpu", "memory"), shape["before"], strict=True)
            }
        }
    return Recommendation(
        container=container,
        created_at=timezone.now(),
        lower_cpu_millicores=low_c,
        target_cpu_millicores=target_c,
        upper_cpu_millicores=up_c,
        lower_memory_bytes=low_m,
        target_memory_bytes=target_m,
        upper_memory_bytes=up_m,
        explanation=explanation,
    )


def _recommend(container: Container, shape: dict | None) -> None:
    if shape is None:
        return
    rec = _recommendation(container, shape)
    rec.save()
    container.latest_recommendation = rec
    container.save(update_fields=["latest_recommendation"])


def _rules(now):
    return RiskRules(oom_since=now - timedelta(days=7), shortfall_percent=10)


FIELDS = ("status", "savings", "risk", "recent_ooms", "shortfall")


def _sql_facts(workloads, now) -> dict[int, tuple]:
    rows = (
        Workload.objects.filter(pk__in=[w.pk for w in workloads])
        .with_provisioning(prices=PRICES, rules=_rules(now))
        .values_list("pk", *FIELDS, "missing_count", "no_data_count")
    )
    return {
        pk: (status, round(savings, 6), risk, ooms, short, missing > 0, no_data > 0)
        for pk, status, savings, risk, ooms, short, missing, no_data in rows
    }


def _python_facts(workload: Workload, now) -> tuple:
    rules = _rules(now)
    facts = workload_facts(
        container_facts(
            c,
            recent_ooms=c.oom_kills.filter(occurred_at__gte=rules.oom_since).count(),
            replicas=workload.replicas,
            prices=PRICES,
            rules=rules,
        )
        for c in Container.objects.recommended()
        .filter(workload=workload)
        .select_related("latest_recommendation")
    )
    return (
        facts.status,
        round(facts.savings, 6),
        facts.risk,
        facts.recent_ooms,
        facts.shortfall_percent,
        facts.missing_requests,
        facts.no_data,
    )


def test_container_facts_in_python_and_sql_agree_on_every_combination():
    now = timezone.now()
    cluster = make_cluster()
    workloads = []
    combos = itertools.product(RECOMMENDATIONS, CPU_REQUESTS, MEMORY_REQUESTS)
    for index, (shape, cpu, memory) in enumerate(combos):
        workload = make_workload(
            cluster,
            f"w{index}",
            containers={
                "app": {"request_cpu_millicores": cpu, "request_memory_bytes": memory}
            },
        )
        container = workload.containers.get()
        _recommend(container, RECOMMENDATIONS[shape])
        if index % 7 == 0:  # some recent OOM kills, and an old one
            OomKill.objects.create(container=container, pod="p", occurred_at=now)
            OomKill.objects.create(
                container=container, pod="p", occurred_at=now - timedelta(days=9)
            )
        workloads.append(workload)

    sql = _sql_facts(workloads, now)

    python = {w.pk: _python_facts(w, now) for w in workloads}
    assert python == sql
    assert {facts[0] for facts in python.values()} == {
        "under",
        "over",
        "missing",
        "no-data",
        "within",
    }
    # Shortfalls of several sizes, and none under the 10 % margin (75 vs 80).
    assert {facts[4] for facts in python.values()} == {0, 37}


def test_workload_facts_in_python_and_sql_agree_with_several_containers():
    now = timezone.now()
    cluster = make_cluster()
    # One container per kind of fact, in every pair, with an init container that is
    # far below its bounds and OOM-killed (left out by both rules).
    kinds = {
        "short": (
            {"request_cpu_millicores": 50, "request_memory_bytes": MI},
            "cpu only",
        ),
        "over": (
            {"request_cpu_millicores": 150, "request_memory_bytes": MI},
            "cpu only",
        ),
        "within": (
            {"request_cpu_millicores": 100, "request_memory_bytes": MI},
            "cpu only",
        ),
        "missing": ({"request_cpu_millicores": 100}, "cpu only"),
        # One pod of four resized in place to 100m: the live pods' mean request.
        "resized": (
            {
                "request_cpu_millicores": 150,
                "request_memory_bytes": MI,
                "pods_request_cpu_millicores": 137.5,
                "pods_request_memory_bytes": float(MI),
            },
            "cpu only",
        ),
        "no-data": (
            {"request_cpu_millicores": 100, "request_memory_bytes": MI},
            "none",
        ),
    }
    workloads = []
    for index, pair in enumerate(itertools.combinations(kinds, 2)):
        containers = {name: kinds[name][0] for name in pair}
        containers["init"] = {"request_cpu_millicores": 1}
        workload = make_workload(cluster, f"pair{index}", containers=containers)
        Container.objects.filter(workload=workload, name="init").update(
            kind=Container.Kind.INIT
        )
        for container in workload.containers.all():
            shape = "cpu only" if container.name == "init" else kinds[container.name][1]
            _recommend(container, RECOMMENDATIONS[shape])
            if container.name == "init":
                OomKill.objects.create(container=container, pod="p", occurred_at=now)
        workloads.append(workload)

    sql = _sql_facts(workloads, now)

    assert {w.pk: _python_facts(w, now) for w in workloads} == sql
    # The resized container saves what its pods' mean request is above the target.
    resized = next(
        w
        for w in workloads
        if {"resized", "within"} <= {c.name for c in w.containers.all()}
    )
    assert sql[resized.pk][1] == round(
        resized.replicas * PRICES.monthly(cpu_millicores=37.5, memory_bytes=0), 6
    )
    base = Workload.objects.with_provisioning(prices=PRICES, rules=_rules(now))
    for status in ("under", "over", "missing", "no-data", "within"):
        filtered = set(base.filter(status=status).values_list("pk", flat=True))
        assert filtered == {pk for pk, f in sql.items() if f[0] == status}
    assert set(base.at_risk().values_list("pk", flat=True)) == {
        pk for pk, f in sql.items() if f[2] > 0
    }
    assert set(base.wasteful().values_list("pk", flat=True)) == {
        pk for pk, f in sql.items() if f[1] > 0
    }
    assert set(base.missing_requests().values_list("pk", flat=True)) == {
        pk for pk, f in sql.items() if f[5]
    }


def test_a_workload_without_a_policy_row_is_off_in_the_dashboard_and_the_api():
    cluster = make_cluster()
    make_workload(cluster, "initial", mode=Policy.Mode.INITIAL)
    make_workload(cluster, "off")
    bare = make_workload(cluster, "bare")
    Policy.objects.filter(workload=bare).delete()

    page = list_workloads(
        filters=WorkloadFilters(mode="Off"), now=timezone.now(), prices=PRICES
    )
    client = Client()
    client.force_login(make_user("vera", Role.VIEWER))
    api = client.get("/api/v1/workloads/?mode=Off").json()["results"]

    assert sorted(w.name for w in page) == ["bare", "off"]
    assert sorted(w["name"] for w in api) == ["bare", "off"]
    assert [w["mode"] for w in api] == ["Off", "Off"]


# Confidences around the overview's bands (upstream's days of history), and values
# that are no confidence at all.
CONFIDENCES = (0.0, 0.5, 1.0, 6.99, 7.0, 400, 1e12, -1.0, "lots", True, None)


def on_and_off():
    """Cluster "on", and "off", disabled, for every 11th workload of a varied fleet."""
    cluster, off = make_cluster("on"), make_cluster("off")
    Cluster.objects.filter(pk=off.pk).update(is_enabled=False)
    return cluster, off


def varied_fleet(now, *, cluster_of, namespace_of=lambda index: "default"):
    """A workload for every combination of recommendation shape and requests, in the
    cluster and namespace ``cluster_of`` / ``namespace_of`` give for its index:
    sidecars, init containers (every third; never counted), replicas of 0 to 3 or
    unknown (every fifth), gone workloads (every 13th), confidences of every kind and
    OOM kills (recent and old, also of init containers): the overview's and the
    lists' parity fleet. Written in bulk, a statement per table (the rows
    ``make_workload`` and ``_recommend`` write, without their 4,000 statements)."""
    combos = list(itertools.product(RECOMMENDATIONS, CPU_REQUESTS, MEMORY_REQUESTS))
    workloads = Workload.objects.bulk_create(
        Workload(
            cluster=cluster_of(index),
            kind=Workload.Kind.DEPLOYMENT,
            namespace=namespace_of(index),
            name=f"w{index}",
            replicas=None if index % 5 == 0 else (3, 1, 0, 2)[index % 4],
            is_active=index % 13 != 0,
            selector={"matchLabels": {"app": f"w{index}"}},
            labels={"app": f"w{index}"},
        )
        for index in range(len(combos))
    )
    Policy.objects.bulk_create(
        Policy(workload=workload, mode=Policy.Mode.OFF) for workload in workloads
    )
    specs = []  # (index, workload, name, requests, kind)
    for index, (workload, (_, cpu, memory)) in enumerate(
        zip(workloads, combos, strict=True)
    ):
        specs.append((index, workload, "app", (cpu, memory), Container.Kind.REGULAR))
        specs.append((index, workload, "side", (100, MI), Container.Kind.REGULAR))
        if index % 3 == 0:
            specs.append((index, workload, "init", (1, None), Container.Kind.INIT))
    containers = Container.objects.bulk_create(
        Container(
            workload=workload,
            name=name,
            position=("app", "side", "init").index(name),
            kind=kind,
            request_cpu_millicores=cpu,
            request_memory_bytes=memory,
        )
        for _, workload, name, (cpu, memory), kind in specs
    )
    recommendations, recommended, kills = [], [], []
    for container, (index, _, name, _, _) in zip(containers, specs, strict=True):
        shape = RECOMMENDATIONS["cpu only" if name != "app" else combos[index][0]]
        if shape is not None:
            rec = _recommendation(container, shape)
            # A confidence of every kind, in place of the cpu entry.
            rec.explanation = {
                **rec.explanation,
                "resources": {
                    **rec.explanation.get("resources", {}),
                    "cpu": {"confidence": CONFIDENCES[index % len(CONFIDENCES)]},
                },
            }
            rec.fill_explanation_columns()
            recommendations.append(rec)
            recommended.append(container)
        # OOM kills: 1-3 recent ones (ties on the score, and several scores),
        # old ones, and ones of init containers (never risk).
        for k in range((index % 4) if name != "side" else int(index % 9 == 0)):
            for days in (0, 8):
                kills.append(
                    OomKill(
                        container=container,
                        pod=f"p{k}",
                        occurred_at=now - timedelta(days=days, minutes=k),
                    )
                )
    for container, rec in zip(
        recommended, Recommendation.objects.bulk_create(recommendations), strict=True
    ):
        container.latest_recommendation = rec
    Container.objects.bulk_update(recommended, ["latest_recommendation"])
    OomKill.objects.bulk_create(kills)


def test_the_overview_counts_and_ranks_as_the_workload_and_container_facts_do():
    """fleet_overview reads risk from the containers that carry some, the confidence
    from Recommendation.confidence and no-data from its totals: each equals the
    workload annotations / the explanation it stands for, on a varied fleet."""
    from recommender.services.dashboard.overview import fleet_overview
    from recommender.services.readmodels.namespace_totals import confidence_band

    now = timezone.now()
    cluster, off = on_and_off()
    varied_fleet(now, cluster_of=lambda index: off if index % 11 == 0 else cluster)
    shown = Workload.objects.shown().with_provisioning(prices=PRICES, rules=_rules(now))
    ranked = list(
        shown.at_risk().order_by("-risk", "-savings", "pk").values_list("pk", flat=True)
    )
    latest = [
        c.latest_recommendation
        for c in Container.objects.recommended()
        .shown()
        .select_related("latest_recommendation")
    ]
    bands = {"low": 0, "medium": 0, "high": 0, "unknown": 0}
    for rec in latest:
        if rec is not None:
            value = rec.explanation["resources"]["cpu"]["confidence"]
            is_number = isinstance(value, int | float) and not isinstance(value, bool)
            assert rec.confidence == (float(value) if is_number else None)
            bands[confidence_band(rec.confidence)] += 1
    for limit in (1, 3, 10, len(ranked) + 5):
        overview = fleet_overview(now=now, prices=PRICES, limit=limit)

        assert overview.at_risk_count == len(ranked)
        assert [w.pk for w in overview.at_risk] == ranked[:limit]
    # The facts the rows show are the annotations'.
    annotated = {
        pk: (ooms, short, risk, round(savings, 6))
        for pk, ooms, short, risk, savings in shown.values_list(
            "pk", "recent_ooms", "shortfall", "risk", "savings"
        )
    }
    assert {
        w.pk: (w.recent_ooms, w.shortfall, w.risk, round(w.savings, 6))
        for w in overview.at_risk
    } == {pk: annotated[pk] for pk in ranked}
    # Ties on the score are broken by savings within the top rows.
    scores = [w.risk for w in overview.at_risk]
    assert len(set(scores)) < len(scores) and len(set(scores)) > 3
    assert overview.recent_oom_count == (
        OomKill.objects.filter(
            container__workload__in=Workload.objects.shown(),
            occurred_at__gte=_rules(now).oom_since,
        ).count()
    )
    assert overview.missing_requests_count == shown.missing_requests().count() > 0
    assert overview.no_recommendation_count == (
        Container.objects.recommended().shown().no_data().count()
    )
    assert overview.confidence == bands
    assert all(bands.values())
    # The list's rows (facts computed in Python for the page) say what the
    # annotations say, on every page and sort.
    facts = (
        "status",
        "savings",
        "risk",
        "recent_ooms",
        "shortfall",
        "missing_count",
        "no_data_count",
    )
    expected = {
        row[0]: (*row[1:2], round(row[2], 6), *row[3:6], row[6] > 0, row[7] > 0)
        for row in shown.values_list("pk", *facts)
    }
    for sort in ("name", "risk", "savings"):
        listed = {}
        for number in (1, 2, 3):
            page = list_workloads(
                filters=WorkloadFilters(sort=sort),
                page=number,
                page_size=60,
                now=now,
                prices=PRICES,
            )
            for w in page:
                listed[w.pk] = (
                    w.status,
                    round(w.savings, 6),
                    w.risk,
                    w.recent_ooms,
                    w.shortfall,
                    w.missing_count > 0,
                    w.no_data_count > 0,
                )
        assert listed == expected
