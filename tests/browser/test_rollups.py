"""The label rollup in a real browser: teams of the simulated fleet, their savings and
statuses, another label key, and the savings trend chart drawn by plotly."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from recommender.models import Cluster, RefreshRun, Workload
from recommender.roles import Role
from recommender.services.readmodels.provisioning import Prices
from recommender.services.readmodels.rollups import rollup
from recommender.services.refresh.cycle import refresh_cluster
from tests.browser.conftest import screenshot
from tests.factories import make_cluster, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-only"


def _money(text: str) -> float:
    # The money filter: "$1,234", "-$12.50".
    return float(re.sub(r"[^0-9.\-]", "", text))


def test_viewer_reads_the_team_rollup_and_the_savings_trend(page):
    settings.SIMULATION_WORKLOADS = 24
    now = timezone.now()
    cluster = make_cluster("sim", kind=Cluster.Kind.SIMULATED)
    # Refreshes in three different hours: three points of the (hourly) trend.
    for hours_ago in (2, 1, 0):
        run = refresh_cluster(
            cluster_id=cluster.pk, now=now - timedelta(hours=hours_ago)
        )
        assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    make_user("vera", Role.VIEWER)
    expected = rollup(by="label", key="team", now=now, prices=Prices.from_settings())
    teams = {g.name for g in expected.groups}
    assert {"platform", "storefront"} <= teams and "" in teams

    page.goto("/")
    page.fill("#id_username", "vera")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/$"))
    page.click("header nav >> text=Rollups")
    # Let the first page finish (plotly's bundle is 1.2 MB) before leaving it.
    page.wait_for_selector("#savings-trend[data-drawn=true]")
    page.click("[data-testid=by-label]")
    page.wait_for_url(re.compile(r"by=label"))

    rows = page.locator("[data-testid=rollup-row]")
    assert rows.count() == len(expected.groups)
    shown = [rows.nth(i).get_attribute("data-group") for i in range(rows.count())]
    # Largest savings first, as the service orders them.
    assert shown == [g.name for g in expected.groups]
    first = expected.groups[0]
    cell = rows.nth(0).locator("[data-testid=group-savings]").inner_text()
    assert _money(cell) == pytest.approx(first.savings, abs=1)
    unlabelled = page.locator('[data-testid=rollup-row][data-group=""]')
    assert "(no team label)" in unlabelled.inner_text()
    total = page.locator("[data-testid=rollup-total]").inner_text()
    assert str(Workload.objects.filter(is_active=True).count()) in total

    # The trend chart: plotly draws it from the json_script data (no inline script).
    page.wait_for_selector("#savings-trend[data-drawn=true] .main-svg")
    points = page.evaluate("document.getElementById('savings-trend').data[0].x.length")
    assert points == 3
    screenshot(page, "rollups-by-team")

    # Another label key: the product a workload is part of.
    page.fill("[data-testid=label-key]", "app.kubernetes.io/part-of")
    page.click("form.filters button[type=submit]")
    page.wait_for_url(re.compile(r"key=app.kubernetes.io%2Fpart-of"))
    products = page.locator("[data-testid=rollup-row]")
    by_product = rollup(
        by="label",
        key="app.kubernetes.io/part-of",
        now=now,
        prices=Prices.from_settings(),
    )
    assert products.count() == len(by_product.groups)
    assert page.locator('[data-testid=rollup-row][data-group=""]').count() == 0
