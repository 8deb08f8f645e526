"""With a price table by instance type (and a ``*`` row), every workload with a pod
is priced by the table through the nodes its pods run on, as the node pools are, and
the overview says so."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from recommender.cluster.simulated import build_fleet
from recommender.cluster.simulated_nodes import simulated_inventory
from recommender.models import Cluster, NodePool, Workload
from recommender.services.connections import cluster_adapter_for
from recommender.services.dashboard.overview import fleet_overview
from recommender.services.readmodels.provisioning import Prices
from recommender.services.refresh.cycle import refresh_cluster

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
# Per instance type: (per core-hour, per GiB-hour); the rest match the * row.
ROWS = {"m5.xlarge": (0.048, 0.006), "m5.2xlarge": (0.046, 0.0058)}
ANY = (0.05, 0.007)


@pytest.fixture(autouse=True)
def fleet(settings, tmp_path):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 24
    settings.SIMULATION_HISTORY_DAYS = 0.2
    path = tmp_path / "prices.csv"
    path.write_text(
        "match,per_core_hour,per_gib_hour,spot_discount\n"
        + "".join(f"instance_type={k},{c},{g},0\n" for k, (c, g) in ROWS.items())
        + f"*,{ANY[0]},{ANY[1]},0\n"
    )
    settings.PRICE_TABLE = str(path)


@pytest.mark.django_db
def test_workloads_are_priced_by_the_table_rows_of_their_pods_nodes():
    cluster = Cluster.objects.create(name="sim", kind=Cluster.Kind.SIMULATED)
    refresh_cluster(cluster_id=cluster.pk, now=NOW)

    # Where the simulation puts each pod, and the table's price of that node.
    snapshot = cluster_adapter_for(cluster, now=NOW).discover()
    inventory = simulated_inventory(build_fleet(7, 24), snapshot)
    by_pod = {(p.namespace, p.name): p.node for p in inventory.pods}
    expected = {}
    for workload in snapshot.workloads:
        names = [by_pod[(p.namespace, p.name)] for p in workload.pods]
        if not names:
            continue
        prices = [ROWS.get(inventory.nodes[name].pool, ANY) for name in names]
        expected[(workload.namespace, workload.name)] = (
            math.fsum(c for c, _ in prices) / len(prices),
            math.fsum(g for _, g in prices) / len(prices),
        )
    assert expected

    for (namespace, name), (core, gib) in expected.items():
        row = Workload.objects.get(cluster=cluster, namespace=namespace, name=name)
        assert row.price_source == "table", name
        assert row.price_per_core_hour == pytest.approx(core, rel=1e-12), name
        assert row.price_per_gib_hour == pytest.approx(gib, rel=1e-12), name
    # The instance-type rows priced some (not only the * row).
    assert any(core != ANY[0] for core, _ in expected.values())

    # The pools price their nodes by the same rows.
    for pool in NodePool.objects.filter(cluster=cluster):
        core, gib = ROWS.get(pool.name, ANY)
        assert pool.price_source == "table"
        assert pool.node_monthly_cost == pytest.approx(
            730
            * (
                core * pool.node_cpu_millicores / 1000
                + gib * pool.node_memory_bytes / 2**30
            )
        )

    # The overview says the savings are at the table's prices, not the list prices.
    overview = fleet_overview(now=NOW, prices=Prices.from_settings())
    mix = {m.source: m for m in overview.price_mix}
    assert mix["table"].workloads == len(expected)
    cores = [core for core, _ in expected.values()]
    assert mix["table"].core_hour == pytest.approx((min(cores), max(cores)))


@pytest.mark.django_db
def test_the_overview_page_prints_the_table_prices_and_the_currency(
    client, django_user_model, settings
):
    from recommender.roles import Role, grant_role

    settings.CURRENCY = "EUR"
    cluster = Cluster.objects.create(name="sim", kind=Cluster.Kind.SIMULATED)
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    user = django_user_model.objects.create_user("viewer", password="x")
    grant_role(user, Role.VIEWER)
    client.force_login(user)
    page = client.get("/").content.decode()
    prices = page.split('data-testid="fleet-prices">', 1)[1].split("</div>", 1)[0]
    assert prices.startswith("at the prices of their nodes: table (")
    assert "EUR/core-hour" in prices and "$" not in prices
    # The list prices appear only for the workloads no node priced.
    assert ("0.031611" in prices) == (" default (" in prices)
