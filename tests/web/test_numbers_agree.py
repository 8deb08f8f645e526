"""The same facts under the same names everywhere: the rollups' at risk, wasteful and
missing-requests counts are the list's and the overview's; the list shows replicas,
container names and one CPU unit per column; the trend says when it can draw."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from recommender.models import SavingsSnapshot, Workload
from recommender.services.dashboard.overview import fleet_overview
from recommender.services.readmodels.provisioning import risk_rules
from recommender.services.readmodels.rollups import rollup
from recommender.services.readmodels.savings_trend import savings_trend
from tests.factories import make_cluster, make_recommendation, make_workload
from tests.services.test_provisioning_parity import PRICES, on_and_off, varied_fleet
from tests.web.conftest import client_for

pytestmark = pytest.mark.django_db
MI = 2**20


def test_rollups_list_and_overview_count_the_same_facts_on_a_varied_fleet(viewer):
    now = timezone.now()
    cluster, off = on_and_off()
    varied_fleet(
        now,
        cluster_of=lambda index: off if index % 11 == 0 else cluster,
        namespace_of=lambda index: ("shop", "data", "ops")[index % 3],
    )
    listed = Workload.objects.shown().with_provisioning(
        prices=PRICES, rules=risk_rules(now)
    )
    in_list = {
        "at_risk": listed.at_risk().count(),
        "wasteful": listed.wasteful().count(),
        "missing_requests": listed.missing_requests().count(),
    }
    # A varied fleet: several workloads with each fact, and some with two.
    assert all(count > 1 for count in in_list.values()), in_list

    overview = fleet_overview(now=now, prices=PRICES)
    for by in ("cluster", "namespace", "kind"):
        total = rollup(by=by, now=now, prices=PRICES).total
        assert {
            "at_risk": total.at_risk,
            "wasteful": total.wasteful,
            "missing_requests": total.missing_requests,
        } == in_list, by
    assert overview.at_risk_count == in_list["at_risk"]
    assert overview.missing_requests_count == in_list["missing_requests"]
    # The API says the same under the same names.
    api = client_for(viewer).get("/api/v1/rollups?by=namespace").json()["total"]
    assert {name: api[name] for name in in_list} == in_list
    for name, count in in_list.items():
        # (The API lists deleted workloads too unless asked not to.)
        page = (
            client_for(viewer)
            .get(f"/api/v1/workloads/?{name}=true&is_active=true")
            .json()
        )
        assert page["count"] == count, name


def test_the_rollups_page_heads_its_columns_with_the_facts(viewer):
    cluster = make_cluster()
    make_workload(cluster, "web")

    page = client_for(viewer).get(reverse("rollups")).content.decode()

    for heading in ("At risk", "Wasteful", "Missing requests"):
        assert f">{heading}</th>" in page


def test_the_list_shows_replicas_container_names_and_millicores(viewer):
    cluster = make_cluster()
    web = make_workload(
        cluster,
        "web",
        replicas=4,
        containers={
            "app": {"request_cpu_millicores": 1250, "request_memory_bytes": 512 * MI},
            "proxy": {"request_cpu_millicores": 100, "request_memory_bytes": 64 * MI},
        },
    )
    make_recommendation(web.containers.get(name="app"), cpu_millicores=247)
    make_workload(cluster, "db", replicas=1)

    page = client_for(viewer).get(reverse("workloads")).content.decode()

    assert ">Replicas</th>" in page
    assert 'data-testid="replicas">4<' in page
    # One unit per column: millicores, even above a core.
    assert "1250m → 247m" in page
    assert "1.25 cores" not in page
    # A multi-container workload names each line; a one-container one need not.
    assert 'data-testid="container-name">app<' in page
    assert 'data-testid="container-name">proxy<' in page
    assert page.count('data-testid="container-name"') == 2


def test_a_trend_of_one_point_says_when_the_next_is_recorded(viewer):
    cluster = make_cluster()
    now = timezone.now().replace(minute=20, second=0, microsecond=0)
    taken = now.replace(minute=0)
    SavingsSnapshot.objects.create(
        cluster=cluster, namespace="default", taken_at=taken, savings_monthly=12.0
    )

    trend = savings_trend(now=now, days=7)
    api = client_for(viewer).get("/api/v1/savings-trend?days=7").json()
    page = client_for(viewer).get(reverse("rollups")).content.decode()

    assert len(trend.points) == 1 and not trend.has_enough_points
    assert trend.next_point_after == taken + timedelta(hours=1)
    assert api["next_point_after"] is not None
    assert 'data-testid="trend-not-enough"' in page
    SavingsSnapshot.objects.create(
        cluster=cluster,
        namespace="default",
        taken_at=taken + timedelta(hours=1),
        savings_monthly=10.0,
    )
    later = savings_trend(now=now + timedelta(hours=1), days=7)
    assert later.has_enough_points and later.next_point_after is None
