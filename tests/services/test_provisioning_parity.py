"""The dashboard's rules hold in Python and in SQL alike (review finding 17): status
per container and per workload, and the mode filter (no policy row = Off) shared by the
dashboard list and the API."""

from __future__ import annotations

import itertools

import pytest
from django.test import Client
from django.utils import timezone

from recommender.models import Container, Policy, Recommendation, Workload
from recommender.roles import Role
from recommender.services.dashboard.insights import WorkloadFilters, list_workloads
from recommender.services.dashboard.provisioning import (
    Prices,
    annotate_workloads,
    container_status,
    recommended_containers,
    with_status,
    workload_status,
)
from tests.factories import make_cluster, make_user, make_workload

pytestmark = pytest.mark.django_db

PRICES = Prices(per_core_hour=0.03, per_gib_hour=0.004)
MI = 2**20
# Requests around bounds lower 80 / upper 120 (cpu m) and 80/120 MiB: absent, below,
# within, above.
CPU_REQUESTS = (None, 50, 100, 150)
MEMORY_REQUESTS = (None, 50 * MI, 100 * MI, 150 * MI)
RECOMMENDATIONS = {
    "none": None,
    "both": dict(cpu=(80, 100, 120), memory=(80 * MI, 100 * MI, 120 * MI)),
    "cpu only": dict(cpu=(80, 100, 120), memory=(None, None, None)),
    "memory only": dict(cpu=(None, None, None), memory=(80 * MI, 100 * MI, 120 * MI)),
    # A row with bounds but no target (the engine had no target to give).
    "bounds, no target": dict(cpu=(80, None, 120), memory=(80 * MI, None, 120 * MI)),
}


def _recommend(container: Container, shape: dict | None) -> None:
    if shape is None:
        return
    (low_c, target_c, up_c), (low_m, target_m, up_m) = shape["cpu"], shape["memory"]
    rec = Recommendation.objects.create(
        container=container,
        created_at=timezone.now(),
        lower_cpu_millicores=low_c,
        target_cpu_millicores=target_c,
        upper_cpu_millicores=up_c,
        lower_memory_bytes=low_m,
        target_memory_bytes=target_m,
        upper_memory_bytes=up_m,
        explanation={},
    )
    container.latest_recommendation = rec
    container.save(update_fields=["latest_recommendation"])


def _sql_statuses(workloads) -> dict[int, str]:
    now = timezone.now()
    return dict(
        annotate_workloads(
            Workload.objects.filter(pk__in=[w.pk for w in workloads]),
            now=now,
            prices=PRICES,
        ).values_list("pk", "status")
    )


def _python_status(workload: Workload) -> str:
    return workload_status(
        container_status(c)
        for c in recommended_containers()
        .filter(workload=workload)
        .select_related("latest_recommendation")
    )


def test_container_status_in_python_and_sql_agree_on_every_combination():
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
        _recommend(workload.containers.get(), RECOMMENDATIONS[shape])
        workloads.append(workload)

    sql = _sql_statuses(workloads)

    python = {w.pk: _python_status(w) for w in workloads}
    assert python == sql
    assert set(python.values()) == {"under", "over", "within", "no-data"}


def test_workload_status_in_python_and_sql_agree_with_several_containers():
    cluster = make_cluster()
    # One container per status, in every pair and with an init container that is
    # under-provisioned (left out by both rules).
    kinds = {
        "under": ({"request_cpu_millicores": 50}, "cpu only"),
        "over": ({"request_cpu_millicores": 150}, "cpu only"),
        "within": ({"request_cpu_millicores": 100}, "cpu only"),
        "no-data": ({"request_cpu_millicores": 100}, "none"),
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
        workloads.append(workload)

    sql = _sql_statuses(workloads)

    assert {w.pk: _python_status(w) for w in workloads} == sql
    for status in ("under", "over", "within", "no-data"):
        filtered = set(
            with_status(Workload.objects.all(), status).values_list("pk", flat=True)
        )
        assert filtered == {pk for pk, s in sql.items() if s == status}


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
