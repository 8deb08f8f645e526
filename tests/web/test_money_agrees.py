"""Every surface shows the same money and millicores: on a varied fleet (an HPA, a
CronJob priced by its running hours, a DaemonSet on part of a pool, workloads priced
by price-table rows, a workload with one pod of six resized in place and verified),
the overview, the list, the rollups, the workload page, the API, the CSV export, the
notifications' digest, the namespace patch's PR text and the realized savings agree
to the cent and the millicore, before and after the refresh stores its totals; the
resized pod's share is realized, never potential as well."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest

from recommender.cluster.base import ContainerSpec, PodInfo
from recommender.engine.resources import Resources
from recommender.models import Cluster, Container, ResizeChange, Workload, WorkloadPod
from recommender.models.provisioning import billed_request, pods_billed
from recommender.services.advice import drift
from recommender.services.advice.namespace_patch import namespace_patch
from recommender.services.dashboard.overview import fleet_overview
from recommender.services.dashboard.workload_insight import workload_insight
from recommender.services.operations import notifications
from recommender.services.readmodels import namespace_totals
from recommender.services.readmodels.provisioning import Prices, risk_rules
from recommender.services.readmodels.realized import realized_savings
from recommender.services.readmodels.rollups import rollup
from recommender.services.refresh.pods import pods_requests
from recommender.text import money_text
from tests.factories import make_cluster, make_recommendation, make_workload
from tests.web.conftest import client_for

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
MI = 2**20
GI = 2**30
# Price-table rows as the refresh stores them on the workloads (node_prices.py).
M5_XLARGE = (0.048, 0.006)
M5_2XLARGE = (0.046, 0.0058)


def _priced(workload: Workload, prices: tuple[float, float]) -> None:
    Workload.objects.filter(pk=workload.pk).update(
        price_per_core_hour=prices[0],
        price_per_gib_hour=prices[1],
        price_source="table",
    )


def varied_fleet() -> Cluster:
    cluster = make_cluster("prod")
    # One pod of six resized in place (500m -> 203m) and verified; table-priced.
    web = make_workload(
        cluster,
        "web",
        namespace="shop",
        replicas=6,
        containers={
            "app": {"request_cpu_millicores": 500, "request_memory_bytes": 256 * MI},
            "proxy": {"request_cpu_millicores": 100, "request_memory_bytes": 64 * MI},
        },
    )
    app, proxy = web.containers.order_by("name")
    make_recommendation(app, cpu_millicores=203, memory_bytes=335 * MI)
    make_recommendation(proxy, cpu_millicores=40, memory_bytes=50 * MI)
    _priced(web, M5_XLARGE)
    before = {"requests": {"cpu": 500, "memory": 256 * MI}}
    after = {"requests": {"cpu": 203, "memory": 256 * MI}}
    sidecar = {"requests": {"cpu": 100, "memory": 64 * MI}}
    pods = [
        PodInfo(
            namespace="shop",
            name=f"web-{n}",
            phase="Running",
            containers=tuple(
                ContainerSpec(
                    name,
                    requests=Resources(
                        values["requests"]["cpu"], values["requests"]["memory"]
                    ),
                )
                for name, values in (
                    ("app", after if n == 3 else before),
                    ("proxy", sidecar),
                )
            ),
        )
        for n in range(6)
    ]
    for n, pod in enumerate(pods):
        WorkloadPod.objects.create(
            cluster=cluster,
            workload=web,
            namespace="shop",
            name=pod.name,
            containers={"app": after if n == 3 else before, "proxy": sidecar},
            last_seen_at=NOW,
        )
    # What discovery stores of those pods: the mean request they carry.
    for name, (cpu, memory) in pods_requests(pods).items():
        Container.objects.filter(workload=web, name=name).update(
            pods_request_cpu_millicores=cpu, pods_request_memory_bytes=memory
        )
    ResizeChange.objects.create(
        workload=web,
        pod="web-3",
        status=ResizeChange.Status.APPLIED,
        verified_at=NOW,
        resources_before={"app": before},
        resources_after={"app": after},
        requests_removed={"cpu_millicores": 297, "memory_bytes": 0},
    )
    # An HPA scales api on CPU; it needs more memory than it asks (negative).
    api = make_workload(
        cluster,
        "api",
        namespace="shop",
        replicas=4,
        containers={
            "api": {"request_cpu_millicores": 1000, "request_memory_bytes": GI}
        },
    )
    Workload.objects.filter(pk=api.pk).update(
        hpa_conflicts=[
            {"name": "api", "resources": ["cpu"], "min_replicas": 2, "max_replicas": 8}
        ]
    )
    make_recommendation(api.containers.get(), cpu_millicores=800, memory_bytes=4 * GI)
    _priced(api, M5_2XLARGE)
    # A CronJob billed by its running hours, over-provisioned.
    report = make_workload(
        cluster,
        "profile-report",
        namespace="data",
        kind=Workload.Kind.CRON_JOB,
        replicas=None,
        containers={
            "report": {"request_cpu_millicores": 2000, "request_memory_bytes": 3 * GI}
        },
    )
    Workload.objects.filter(pk=report.pk).update(
        schedule="14 */12 * * *", running_hours_month=10.138888888888889
    )
    make_recommendation(
        report.containers.get(), cpu_millicores=350, memory_bytes=392 * MI
    )
    # A DaemonSet on part of a pool (3 of its nodes), list prices.
    agent = make_workload(
        cluster,
        "log-agent",
        namespace="data",
        kind=Workload.Kind.DAEMON_SET,
        replicas=3,
        containers={
            "agent": {"request_cpu_millicores": 250, "request_memory_bytes": 512 * MI}
        },
    )
    make_recommendation(
        agent.containers.get(), cpu_millicores=75, memory_bytes=180 * MI
    )
    return cluster


def _cents(value: float) -> int:
    return round(value * 100)


@pytest.mark.parametrize("stored", [False, True], ids=["on-load", "stored"])
def test_every_surface_shows_the_same_money_and_millicores(viewer, stored):
    cluster = varied_fleet()
    if stored:
        namespace_totals.store(cluster=cluster, now=NOW)  # as the refresh does
    prices = Prices.from_settings()
    client = client_for(viewer)

    # The list (SQL): THE figure of each workload.
    listed = {
        w.name: w
        for w in Workload.objects.shown().with_provisioning(
            prices=prices, rules=risk_rules(NOW)
        )
    }
    savings = {name: w.savings for name, w in listed.items()}
    assert savings["api"] < 0 < savings["web"]
    assert savings["profile-report"] > 0

    # The workload page, per workload and per container.
    pages = {
        name: workload_insight(workload_id=w.pk, now=NOW, prices=prices)
        for name, w in listed.items()
    }
    for name, page in pages.items():
        assert _cents(page.facts.savings) == _cents(savings[name]), name
    per_container = {
        (name, c.container.name): c.savings
        for name, page in pages.items()
        for c in page.containers
    }

    # The API: list and detail.
    api = client.get("/api/v1/workloads/?limit=100").json()["results"]
    assert {w["name"]: _cents(w["savings_monthly"]) for w in api} == {
        name: _cents(value) for name, value in savings.items()
    }
    for row in api:
        detail = client.get(f"/api/v1/workloads/{row['id']}/").json()
        assert detail["savings_monthly"] == row["savings_monthly"]
        assert detail["price_source"] == (
            "table" if row["name"] in ("web", "api") else "default"
        )

    # The CSV export: each container's savings and requests.
    response = client.get("/api/v1/recommendations/export?format=csv")
    text = b"".join(response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    exported = {(r["workload"], r["container"]): r for r in rows}
    for key, value in per_container.items():
        assert _cents(float(exported[key]["savings_monthly"])) == _cents(value), key

    # The overview: fleet, cluster and namespaces; requested millicores.
    overview = fleet_overview(now=NOW, prices=prices)
    total = sum(savings.values())
    assert _cents(overview.fleet.savings) == _cents(total)
    by_namespace = {t.namespace: t.savings for t in overview.by_namespace}
    for namespace in ("shop", "data"):
        expected = sum(w.savings for w in listed.values() if w.namespace == namespace)
        assert _cents(by_namespace[namespace]) == _cents(expected)
    # Requested millicores over every pod billed (a CronJob's running hours / 730),
    # as the live pods carry them: web's five pods at 500m and one at 203m.
    requested = sum(
        pods_billed(page.workload.replicas, page.workload.running_hours_month)
        * (billed_request(c.container, "request_cpu_millicores") or 0)
        for page in pages.values()
        for c in page.containers
    )
    assert overview.fleet.requested_cpu_millicores == round(requested)
    web_requested = sum(
        6 * (billed_request(c.container, "request_cpu_millicores") or 0)
        for c in pages["web"].containers
    )
    assert web_requested == pytest.approx(5 * 500 + 203 + 6 * 100)

    # Realized: one pod's share, the same on the overview and the rollups.
    share = Prices(*M5_XLARGE).monthly(cpu_millicores=297, memory_bytes=0)
    assert realized_savings(prices=prices) == {listed["web"].pk: pytest.approx(share)}
    assert _cents(overview.fleet.realized_savings) == _cents(share)
    # Counted once: the resized pod saves its share as realized, and the potential
    # counts it at the request it carries; together, what all six pods at the
    # template's requests would save.
    own = Prices(*M5_XLARGE)
    app_pod = own.monthly(cpu_millicores=500 - 203, memory_bytes=(256 - 335) * MI)
    resized_pod = own.monthly(cpu_millicores=0, memory_bytes=(256 - 335) * MI)
    proxy_pod = own.monthly(cpu_millicores=100 - 40, memory_bytes=(64 - 50) * MI)
    assert _cents(savings["web"]) == _cents(5 * app_pod + resized_pod + 6 * proxy_pod)
    assert _cents(savings["web"] + share) == _cents(6 * (app_pod + proxy_pod))

    # The rollups, in Python and in the API.
    for by in ("cluster", "namespace", "kind"):
        result = rollup(by=by, now=NOW, prices=prices)
        assert _cents(result.total.savings) == _cents(total), by
        assert _cents(result.total.realized_savings) == _cents(share), by
        answer = client.get(f"/api/v1/rollups?by={by}").json()["total"]
        assert _cents(answer["savings_monthly"]) == _cents(total), by

    # The weekly digest: the headline's net figure, with its currency.
    digest = next(
        n for n in notifications._notices(cluster, NOW) if n.event == "weekly_digest"
    )
    assert f"could save {money_text(total)} per month net" in digest.text

    # The PR text of each namespace: each workload's figure and their sum.
    for namespace in ("shop", "data"):
        patch = namespace_patch(
            cluster="prod",
            namespace=namespace,
            selector=None,
            tolerance=drift.Tolerance.from_settings(),
            dashboard_url="https://vpaweb.example.com",
            now=NOW,
        )
        shown = {
            r["workload"]["name"]: r["savings_monthly"] for r in patch["workloads"]
        }
        assert shown, namespace
        for name, value in shown.items():
            assert _cents(value) == _cents(savings[name]), name
        in_text = sum(shown.values())
        assert (
            f"**Estimated savings:** {money_text(in_text)} per month"
            in (patch["summary_markdown"])
        )
