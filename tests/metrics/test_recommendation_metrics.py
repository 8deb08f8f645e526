"""GET /metrics/recommendations: the recommendations as Prometheus series, per
container and per namespace, behind the metrics token, bounded by namespace and top."""

from __future__ import annotations

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from recommender.models import Workload
from tests.factories import make_cluster, make_recommendation, make_workload

TOKEN = "metrics-token-for-tests"
MIB = 2**20
PRICE_PER_CORE_HOUR = 0.04
PRICE_PER_GIB_HOUR = 0.005
HOURS = 730


@pytest.fixture
def fleet(db, settings):
    """The fleet of make_fleet, the metrics token and the prices set."""
    settings.METRICS_TOKEN = TOKEN
    settings.PRICE_PER_CORE_HOUR = PRICE_PER_CORE_HOUR
    settings.PRICE_PER_GIB_HOUR = PRICE_PER_GIB_HOUR
    make_fleet()


def make_fleet() -> None:
    """prod: shop/web (3 replicas, app 500m/512Mi, recommended 250m/300Mi: wasteful),
    shop/db (1 replica, 100m/1Gi, recommended 400m: at risk, its request below the
    usage floor) and batch/report (200m/256Mi, recommended 100m/128Mi)."""
    prod = make_cluster("prod")
    web = make_workload(prod, "web", namespace="shop")
    make_recommendation(web.containers.get())
    db_ = make_workload(
        prod,
        "db",
        namespace="shop",
        kind=Workload.Kind.STATEFUL_SET,
        replicas=1,
        containers={
            "postgres": {"request_cpu_millicores": 100, "request_memory_bytes": 2**30}
        },
    )
    make_recommendation(db_.containers.get(), cpu_millicores=400, memory_bytes=2**30)
    report = make_workload(
        prod,
        "report",
        namespace="batch",
        replicas=1,
        containers={
            "job": {"request_cpu_millicores": 200, "request_memory_bytes": 256 * MIB}
        },
    )
    make_recommendation(
        report.containers.get(), cpu_millicores=100, memory_bytes=128 * MIB
    )


def scrape(client, query: str = "", token: str | None = TOKEN):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.get(f"/metrics/recommendations{query}", **headers)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(name, sorted labels): value} of an exposition, parsed by prometheus-client."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return out


def container(namespace, workload, kind, name):
    return (
        ("cluster", "prod"),
        ("container", name),
        ("kind", kind),
        ("namespace", namespace),
        ("workload", workload),
    )


WEB = container("shop", "web", "Deployment", "app")
DB = container("shop", "db", "StatefulSet", "postgres")
REPORT = container("batch", "report", "Deployment", "job")


def test_every_container_has_its_requests_bounds_risk_and_savings_in_base_units(
    client, fleet
):
    response = scrape(client)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    got = samples(response.content.decode())
    assert got["vpaweb_recommendation_request_cpu_cores", WEB] == 0.5
    assert got["vpaweb_recommendation_request_memory_bytes", WEB] == 512 * MIB
    assert got["vpaweb_recommendation_target_cpu_cores", WEB] == 0.25
    assert got["vpaweb_recommendation_target_memory_bytes", WEB] == 300 * MIB
    assert got["vpaweb_recommendation_lower_bound_cpu_cores", WEB] == 0.2
    assert got["vpaweb_recommendation_upper_bound_cpu_cores", WEB] == 0.3
    assert got["vpaweb_recommendation_lower_bound_memory_bytes", WEB] == int(
        300 * MIB * 0.8
    )
    assert got["vpaweb_recommendation_upper_bound_memory_bytes", WEB] == int(
        300 * MIB * 1.2
    )
    assert got["vpaweb_recommendation_at_risk", WEB] == 0
    assert got["vpaweb_recommendation_at_risk", DB] == 1
    # 3 pods x (0.25 cores x price + 212 MiB x price) x 730 hours.
    web_savings = (
        3 * (0.25 * PRICE_PER_CORE_HOUR + 212 / 1024 * PRICE_PER_GIB_HOUR) * HOURS
    )
    assert got["vpaweb_recommendation_monthly_savings", WEB] == pytest.approx(
        web_savings
    )
    assert got["vpaweb_recommendation_monthly_savings", DB] < 0  # it asks for more
    shop = (("cluster", "prod"), ("namespace", "shop"))
    assert got["vpaweb_namespace_monthly_savings", shop] == pytest.approx(
        web_savings + got["vpaweb_recommendation_monthly_savings", DB]
    )
    assert got["vpaweb_namespace_containers_at_risk", shop] == 1
    assert got["vpaweb_recommendation_containers_omitted", shop] == 0
    # Ten series per container, three per namespace, and the count itself.
    assert got["vpaweb_recommendation_series", ()] == 3 * 10 + 2 * 3 + 1 == len(got)


def test_top_keeps_the_containers_at_risk_first_then_the_largest_savings(client, fleet):
    got = samples(scrape(client, "?top=2").content.decode())
    exported = {
        labels for name, labels in got if name == "vpaweb_recommendation_at_risk"
    }
    assert exported == {DB, WEB}  # report's savings are the smallest
    batch = (("cluster", "prod"), ("namespace", "batch"))
    assert got["vpaweb_recommendation_containers_omitted", batch] == 1
    # The namespace totals stay whole.
    assert got["vpaweb_namespace_monthly_savings", batch] > 0
    assert got["vpaweb_recommendation_series", ()] == 2 * 10 + 2 * 3 + 1


def test_the_namespace_bound_leaves_the_other_namespaces_out(client, fleet):
    text = scrape(client, "?namespace=batch").content.decode()
    assert not re.search(r'namespace="shop"', text)
    got = samples(text)
    assert got["vpaweb_recommendation_target_cpu_cores", REPORT] == 0.1
    both = samples(scrape(client, "?namespace=batch,shop").content.decode())
    assert ("vpaweb_recommendation_at_risk", DB) in both


@pytest.mark.parametrize("top", ["0", "-1", "ten", "100001"])
def test_a_top_outside_its_range_is_refused_naming_it(client, fleet, top):
    response = scrape(client, f"?top={top}")
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["top"]


def test_the_recommendations_need_the_metrics_token(client, fleet, settings):
    assert scrape(client, token=None).status_code == 401
    assert scrape(client, token="wrong").status_code == 401
    settings.METRICS_TOKEN = ""
    assert scrape(client).status_code == 404


def test_prometheus_scrapes_the_recommendations_over_plain_http(fleet, settings):
    from django.test import Client

    settings.SECURE_SSL_REDIRECT = True
    response = scrape(Client())
    assert response.status_code == 200
    assert b"vpaweb_recommendation_series" in response.content
