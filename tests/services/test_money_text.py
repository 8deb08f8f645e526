"""Signs and units of money and changes where people read them: the namespace
patch's PR text signs the change from the request to the recommendation, every
amount carries its currency (VPAWEB_CURRENCY), notifications give one line per
workload and container with from -> to and money, linking to VPAWEB_DASHBOARD_URL,
and the weekly digest sums the net savings the dashboard's headline shows."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from recommender.models import NotificationChannel, ResizeChange
from recommender.services.advice import drift
from recommender.services.advice.namespace_patch import namespace_patch
from recommender.services.dashboard.overview import fleet_overview
from recommender.services.operations import notifications
from recommender.services.readmodels.provisioning import Prices
from tests.factories import make_cluster, make_recommendation, make_workload

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
MI = 2**20


@pytest.fixture
def web():
    cluster = make_cluster("prod")
    workload = make_workload(
        cluster,
        "web",
        namespace="shop",
        replicas=6,
        containers={
            "app": {"request_cpu_millicores": 500, "request_memory_bytes": 256 * MI}
        },
    )
    make_recommendation(
        workload.containers.get(), cpu_millicores=203, memory_bytes=335 * MI
    )
    return workload


def _patch_text() -> str:
    return namespace_patch(
        cluster="prod",
        namespace="shop",
        selector=None,
        tolerance=drift.Tolerance.from_settings(),
        dashboard_url="https://vpaweb.example.com",
        now=NOW,
    )["summary_markdown"]


def test_the_pr_text_signs_the_change_from_the_request_to_the_recommendation(web):
    text = _patch_text()
    assert "| app | cpu | 500m | 203m | -59.4 % |" in text
    assert "| app | memory | 256Mi | 335Mi | +30.9 % |" in text


def test_every_amount_of_the_pr_text_carries_the_currency(web, settings):
    settings.CURRENCY = "EUR"
    savings = fleet_overview(now=NOW, prices=Prices.from_settings()).fleet.savings
    text = _patch_text()
    assert f"**Estimated savings:** {savings:,.2f} EUR per month" in text
    assert f"- Deployment/web: {savings:,.2f} EUR per month; risk:" in text
    assert "USD" not in text


def test_a_notification_is_one_line_per_container_with_from_to_and_money(web, settings):
    settings.CURRENCY = "EUR"
    settings.DASHBOARD_URL = "https://vpaweb.example.com/"
    before = {"requests": {"cpu": 500, "memory": 256 * MI}}
    after = {"requests": {"cpu": 203, "memory": 335 * MI}}
    for pod in range(3):
        ResizeChange.objects.create(
            workload=web,
            pod=f"web-{pod}",
            resources_before={"app": before},
            resources_after={"app": after},
        )
    channel = NotificationChannel(name="chat", kind="slack")
    found = [
        n for n in notifications._notices(web.cluster, NOW) if n.event == "proposal"
    ]
    assert len(found) == 1
    prices = Prices.from_settings()
    per_pod = prices.monthly(cpu_millicores=500 - 203, memory_bytes=(256 - 335) * MI)
    text = notifications.message_body(channel, found)["text"]
    assert (
        "- shop/Deployment/web container app: cpu 500m → 203m, memory 256Mi → "
        f"335Mi on 3 pods, {3 * per_pod:,.2f} EUR a month; awaits approval "
        "<https://vpaweb.example.com/changes/|open>"
    ) in text


def test_the_digest_sums_the_net_savings_of_the_dashboards_headline(web):
    # A second workload needs more than it requests: its negative savings count.
    short = make_workload(
        web.cluster,
        "db",
        namespace="shop",
        replicas=2,
        containers={"db": {"request_cpu_millicores": 100, "request_memory_bytes": MI}},
    )
    make_recommendation(short.containers.get(), cpu_millicores=900, memory_bytes=MI)
    headline = fleet_overview(now=NOW, prices=Prices.from_settings()).fleet.savings
    digest = next(
        n
        for n in notifications._notices(web.cluster, NOW)
        if n.event == "weekly_digest"
    )
    assert f"could save {headline:,.2f} USD per month net" in digest.text
