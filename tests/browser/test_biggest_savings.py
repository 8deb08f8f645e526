"""A journey in a real browser: "find the 10 biggest savings" lists the biggest
savings, whatever their risk; "what is at risk" puts recent OOM kills first, then the
largest shortfall. The numbers on the page are checked against the database's.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from recommender.models import Cluster, RefreshRun, Workload
from recommender.roles import Role
from recommender.services.readmodels.provisioning import Prices, risk_rules
from recommender.services.refresh.cycle import refresh_cluster
from tests.browser.conftest import screenshot
from tests.factories import make_cluster, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-only"
FLEET_SIZE = 40


def _seed(now):
    """The simulated demo fleet (its first 40 workloads), refreshed for real: 8 days
    back-filled, OOM kills, sidecars, missing requests."""
    settings.SIMULATION_WORKLOADS = FLEET_SIZE
    cluster = make_cluster("sim", kind=Cluster.Kind.SIMULATED)
    for days_ago in (1, 0):
        run = refresh_cluster(cluster_id=cluster.pk, now=now - timedelta(days=days_ago))
        assert run.status == RefreshRun.Status.SUCCEEDED, run.error


def _rows(page):
    """(namespace/name, savings, fact badges) of the table's rows, in order."""
    rows = []
    table_rows = page.locator("#workload-table tbody tr")
    for i in range(table_rows.count()):
        row = table_rows.nth(i)
        facts = row.get_by_test_id("facts").locator(".badge")
        rows.append(
            (
                row.locator("td").first.locator("a").inner_text(),
                float(row.get_by_test_id("savings").get_attribute("data-value")),
                {facts.nth(j).get_attribute("data-fact") for j in range(facts.count())},
            )
        )
    return rows


def test_the_biggest_savings_and_the_real_risks(page):
    now = timezone.now()
    _seed(now)
    make_user("vera", Role.VIEWER, password=PASSWORD)
    facts = {
        f"{w.namespace}/{w.name}": w
        for w in Workload.objects.shown().with_provisioning(
            prices=Prices.from_settings(), rules=risk_rules(timezone.now())
        )
    }
    biggest = sorted(facts, key=lambda key: (-facts[key].savings, facts[key].pk))[:10]
    riskiest = sorted(
        (key for key in facts if facts[key].risk > 0),
        key=lambda key: (-facts[key].risk, -facts[key].savings, facts[key].pk),
    )
    # The fleet has what the journey is about: savings that are also at risk.
    assert any(facts[key].risk > 0 for key in biggest)
    assert any(facts[key].recent_ooms for key in riskiest)

    page.goto("/")
    page.fill("#id_username", "vera")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/$"))

    # "Find the 10 biggest savings": sort by savings.
    page.click("nav >> text=Workloads")
    page.wait_for_url("**/workloads/")
    page.select_option("select[name=ordering]", "-savings_monthly")
    page.wait_for_url(re.compile(r"ordering=-savings_monthly"))
    page.wait_for_function(
        "document.querySelector('#workload-table tbody tr td a').textContent"
        f" === {biggest[0]!r}"
    )
    rows = _rows(page)[:10]
    screenshot(page, "14-biggest-savings")

    assert [name for name, _, _ in rows] == biggest
    savings = [value for _, value, _ in rows]
    assert savings == sorted(savings, reverse=True)
    assert savings == pytest.approx([facts[key].savings for key in biggest], abs=0.01)
    for name, _, badges in rows:
        expected = {
            fact
            for fact, present in (
                ("at-risk", facts[name].risk > 0),
                ("wasteful", facts[name].savings > 0),
                ("missing-requests", facts[name].missing_count > 0),
            )
            if present
        }
        assert expected <= badges, name
        assert "wasteful" in badges  # the biggest savings are wasteful, at risk or not

    # "What is at risk": only workloads at risk, OOM kills first, then the shortfall.
    page.select_option("select[name=at_risk]", "true")
    page.wait_for_url(re.compile(r"at_risk=true"))
    page.select_option("select[name=ordering]", "-risk,-savings_monthly")
    page.wait_for_url(re.compile(r"ordering=-risk%2C-savings_monthly"))
    page.wait_for_function(
        "document.querySelector('#workload-table tbody tr td a').textContent"
        f" === {riskiest[0]!r}"
    )
    count = page.get_by_test_id("result-count").inner_text()
    assert count.startswith(f"{len(riskiest)} workload")
    rows = _rows(page)
    screenshot(page, "14-at-risk")

    assert [name for name, _, _ in rows] == riskiest[: len(rows)]
    assert all("at-risk" in badges for _, _, badges in rows)
