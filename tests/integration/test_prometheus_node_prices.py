"""Savings at the prices of the nodes pods run on, against a real Prometheus.

The small fleet's history plus OpenCost-shaped node cost series: ``web``'s pods run on
a spot node, ``worker``'s on an on-demand node, ``db``'s on a node without cost
series. Each workload's savings are its excess requests at its node's prices, and
say which prices they used; without the series the price table, then the list
prices, are used.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings as django_settings

from recommender.models import RefreshRun, Workload
from recommender.services.dashboard.workload_insight import workload_insight
from recommender.services.readmodels.provisioning import Prices, risk_rules
from recommender.services.refresh.cycle import refresh_cluster
from tests.integration.test_prometheus_oom_sources import at, refresh_against
from tests.prometheus_support.fixtures import END_S, LoadedPrometheus, loaded_prometheus
from tests.prometheus_support.k8s_objects import objects_for
from tests.web.conftest import client_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
__all__ = ["refresh_against"]  # fixture

NODES = {"web": "spot-1", "worker": "ondemand-1", "db": "other-1"}
# Node prices as multiples of the list prices (VPAWEB_PRICE_PER_*_HOUR), so each
# workload's savings are that multiple of its savings at the list prices.
SPOT, ON_DEMAND = 0.5, 2.0


def opencost_series(default: Prices, *, end_s: int) -> str:
    """OpenCost's node metrics for the last hour, as its exporter labels them."""
    nodes = {
        "spot-1": ("m5.xlarge", "1", SPOT),
        "ondemand-1": ("m5.xlarge", "0", ON_DEMAND),
    }
    families = {
        "node_cpu_hourly_cost": lambda factor: default.per_core_hour * factor,
        "node_ram_hourly_cost": lambda factor: default.per_gib_hour * factor,
        "kubecost_node_is_spot": None,
    }
    lines = []
    for family, price in families.items():
        lines.append(f"# TYPE {family} gauge\n")
        for node, (instance_type, spot, factor) in nodes.items():
            value = float(spot) if price is None else price(factor)
            labels = (
                f'instance="opencost:9003",instance_type="{instance_type}",'
                f'node="{node}",region="eu-west-1"'
            )
            for t in range(end_s - 3600, end_s + 1, 60):
                lines.append(f"{family}{{{labels}}} {value!r} {t}\n")
    return "".join(lines)


@pytest.fixture(scope="module")
def prometheus_with_node_costs(tmp_path_factory):
    costs = opencost_series(Prices.from_settings(), end_s=END_S)
    yield from loaded_prometheus(tmp_path_factory, ("cpu", "memory"), costs)


@pytest.fixture(scope="module")
def prometheus_without_node_costs(tmp_path_factory):
    yield from loaded_prometheus(tmp_path_factory, ("cpu", "memory"))


def on_nodes(loaded: LoadedPrometheus) -> list[dict]:
    """The fleet's objects, each pod scheduled on its workload's node."""
    objects = objects_for(loaded.specs, live_at_s=loaded.end_s)
    for obj in objects:
        if obj["kind"] == "Pod":
            app = obj["metadata"]["labels"]["app"]
            obj.setdefault("spec", {})["nodeName"] = NODES[app]
    return objects


def refreshed(refresh_against, loaded: LoadedPrometheus) -> None:
    cluster = refresh_against(loaded.url, on_nodes(loaded))
    run = refresh_cluster(cluster_id=cluster.pk, now=at(loaded.end_s))
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error


def savings(now_s: int) -> dict[str, tuple[float, str]]:
    """Each workload's savings and price source, as the list and the API read them."""
    rows = Workload.objects.with_provisioning(
        prices=Prices.from_settings(), rules=risk_rules(at(now_s))
    ).values_list("name", "savings", "price_source")
    return {name: (value, source) for name, value, source in rows}


def sources(got: dict[str, tuple[float, str]]) -> dict[str, str]:
    return {name: source for name, (_, source) in got.items()}


def at_list_prices(now_s: int) -> dict[str, float]:
    """The same savings had every workload the list prices."""
    Workload.objects.update(
        price_per_core_hour=None, price_per_gib_hour=None, price_source="default"
    )
    return {name: value for name, (value, _) in savings(now_s).items()}


def test_pods_on_spot_and_on_demand_nodes_are_priced_by_the_node_cost_metrics(
    prometheus_with_node_costs, refresh_against, admin_user
):
    loaded = prometheus_with_node_costs
    refreshed(refresh_against, loaded)
    got = savings(loaded.end_s)
    assert sources(got) == {
        "web": "opencost",
        "worker": "opencost",
        "db": "default",
    }
    web = Workload.objects.get(name="web")
    assert web.price_per_core_hour == pytest.approx(
        django_settings.PRICE_PER_CORE_HOUR * SPOT
    )
    # The workload page and the API say which prices the figure used.
    client = client_for(admin_user)
    assert (
        client.get(f"/api/v1/workloads/{web.pk}/").json()["price_source"] == "opencost"
    )
    listed = client.get("/api/v1/workloads/?namespace=batch").json()["results"]
    assert [row["price_source"] for row in listed] == ["opencost"]
    # The API's figures are the list's (the one savings rule, at the node's prices).
    assert listed[0]["savings_monthly"] == pytest.approx(got["worker"][0], abs=0.01)
    detail = client.get(f"/api/v1/workloads/{web.pk}/").json()
    assert detail["savings_monthly"] == pytest.approx(got["web"][0], abs=0.01)
    # The workload page's figure (computed in Python) is the same.
    insight = workload_insight(
        workload_id=web.pk, now=at(loaded.end_s), prices=Prices.from_settings()
    )
    assert insight.savings == pytest.approx(got["web"][0])
    page = client.get(f"/workloads/{web.pk}/").content.decode()
    assert 'data-testid="price-source"' in page and "opencost prices" in page

    flat = at_list_prices(loaded.end_s)
    assert flat["web"] != 0 and flat["worker"] != 0
    assert got["web"][0] == pytest.approx(flat["web"] * SPOT)
    assert got["worker"][0] == pytest.approx(flat["worker"] * ON_DEMAND)
    assert got["db"][0] == pytest.approx(flat["db"])


def test_without_the_metrics_the_table_then_the_list_prices_are_used(
    prometheus_without_node_costs, refresh_against, tmp_path: Path, settings
):
    loaded = prometheus_without_node_costs
    table = tmp_path / "prices.csv"
    table.write_text(
        "match,per_core_hour,per_gib_hour,spot_discount\n"
        f"node=spot-*,{settings.PRICE_PER_CORE_HOUR * 3},"
        f"{settings.PRICE_PER_GIB_HOUR * 3},0.6\n"
        # Instance types come from the metrics' labels only: none here.
        "instance_type=m5.xlarge,9,9,0\n"
    )
    settings.PRICE_TABLE = str(table)
    refreshed(refresh_against, loaded)
    got = savings(loaded.end_s)
    assert sources(got) == {
        "web": "table",
        "worker": "default",
        "db": "default",
    }
    flat = at_list_prices(loaded.end_s)
    # No spot label without the metrics: the table's price, undiscounted.
    assert got["web"][0] == pytest.approx(flat["web"] * 3)
    assert got["worker"][0] == pytest.approx(flat["worker"])
