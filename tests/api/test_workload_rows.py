"""The workload list's fast rows (api.workload_rows) are WorkloadSerializer's output,
byte for byte once rendered, on a fleet with every odd case; and the list costs the
same few queries for a page of 1 or 1,000."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings
from rest_framework.renderers import JSONRenderer

from recommender.api.queries import filter_workloads, workload_queryset
from recommender.api.serializers import WorkloadSerializer
from recommender.api.workload_rows import workload_rows, workload_values
from recommender.models import Container, Policy, Recommendation, Workload
from tests.api.conftest import token_client
from tests.factories import make_cluster, make_recommendation, make_workload

MI = 2**20


def _odd_fleet() -> None:
    """Workloads covering each branch of the serializer: no policy row, another
    profile, no replicas, HPA conflicts, init and sidecar containers, absent
    requests, partial and bound-only recommendations, sources and template values,
    no containers at all, inactive, and other clusters."""
    prod = make_cluster("prod")
    dev = make_cluster("dev")
    plain = make_workload(prod, "web", namespace="shop", replicas=4)
    make_recommendation(plain.containers.get(), cpu_millicores=300)
    many = make_workload(
        prod,
        "api",
        namespace="shop",
        mode=Policy.Mode.INITIAL,
        containers={
            "app": {"request_cpu_millicores": 1500, "request_memory_bytes": 2 * MI},
            "init": {"request_cpu_millicores": 100, "kind": Container.Kind.INIT},
            "proxy": {"kind": Container.Kind.SIDECAR, "request_memory_bytes": 1000},
            "bare": {},
        },
    )
    app, init, proxy, _bare = many.containers.order_by("position")
    make_recommendation(app, cpu_millicores=2000, memory_bytes=3 * MI)
    make_recommendation(init, cpu_millicores=10)
    make_recommendation(proxy, cpu_millicores=5, memory_bytes=500)
    app.resource_sources = {"requests.cpu": "limitrange", "limits.memory": "template"}
    app.template_resources = {"requests": {"memory": 2 * MI}, "limits": {"cpu": 2000}}
    app.save()
    Policy.objects.filter(workload=many).update(profile="burstable-ish")
    # A recommendation with bounds but no target (no data), one with a CPU target only.
    partial = make_workload(
        prod, "batch", namespace="jobs", kind=Workload.Kind.CRON_JOB, replicas=1
    )
    Workload.objects.filter(pk=partial.pk).update(
        replicas=None,
        hpa_conflicts=[{"name": "batch-hpa", "resources": ["cpu", "memory"]}],
        labels={"team": "data", "tier": "ünïcode"},
    )
    bounds_only = Recommendation.objects.create(
        container=partial.containers.get(),
        created_at=datetime(2026, 1, 5, 10, 0, 0, 123456, tzinfo=UTC),
        lower_cpu_millicores=100,
        upper_memory_bytes=10 * MI,
    )
    Container.objects.filter(pk=bounds_only.container_id).update(
        latest_recommendation=bounds_only
    )
    cpu_only = make_workload(prod, "cpu-only", namespace="jobs", replicas=0)
    rec = make_recommendation(cpu_only.containers.get(), cpu_millicores=100)
    Recommendation.objects.filter(pk=rec.pk).update(
        target_memory_bytes=None, lower_memory_bytes=None, upper_memory_bytes=None
    )
    no_policy = make_workload(dev, "lonely", namespace="default", containers={})
    Policy.objects.filter(workload=no_policy).delete()
    gone = make_workload(dev, "gone", mode=Policy.Mode.RECREATE)
    Workload.objects.filter(pk=gone.pk).update(
        is_active=False, first_seen_at=datetime(2025, 12, 31, 23, 59, 59, tzinfo=UTC)
    )
    make_recommendation(
        gone.containers.get(),
        cpu_millicores=499,
        memory_bytes=513 * MI,
        created_at=datetime.now(UTC) - timedelta(days=3),
    )


def _rendered(data: Any) -> bytes:
    return JSONRenderer().render(data)


def _both(queryset: Any) -> tuple[bytes, bytes]:
    reference = WorkloadSerializer(queryset, many=True).data
    fast = workload_rows(workload_values(queryset))
    return _rendered(reference), _rendered(fast)


@pytest.mark.django_db
@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_fast_rows_render_exactly_as_the_serializer(zone: str) -> None:
    _odd_fleet()
    with override_settings(TIME_ZONE=zone):
        queryset = filter_workloads(workload_queryset(), {})
        reference, fast = _both(queryset)
    assert queryset.count() == 6
    assert fast == reference
    # The fleet reaches the branches it is meant to (else the parity proves little).
    rows = {row["name"]: row for row in workload_rows(workload_values(queryset))}
    assert {row["status"] for row in rows.values()} == {
        "under",
        "over",
        "within",
        "no-data",
    }
    assert rows["lonely"]["mode"] == "Off" and rows["lonely"]["containers"] == []
    assert rows["api"]["profile"] == "burstable-ish"
    assert rows["batch"]["replicas"] is None and rows["batch"]["hpa_conflicts"]
    assert rows["gone"]["is_active"] is False


@pytest.mark.django_db
def test_fast_rows_keep_the_order_and_slices_of_the_queryset() -> None:
    _odd_fleet()
    queryset = filter_workloads(workload_queryset(), {}).order_by("-name")
    reference, fast = _both(queryset[1:4])
    assert fast == reference
    assert workload_rows([]) == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "queries_expected"),
    [
        # token, count (per cluster), page ids, the page's rows, containers, their
        # recent OOM kills; the ids of a page spanning clusters come from its first
        # and last cluster apart and those between in one query: up to two more
        ("", (6, 8)),
        # a fact in the ordering: token, whether every cluster has stored facts
        # (workload_totals.is_complete), count, page ids, the page's annotated
        # rows, containers
        ("&ordering=-savings_monthly,name", (6, 6)),
    ],
)
def test_the_list_answers_the_serializers_page_in_a_few_queries(
    query: str, queries_expected: int
) -> None:
    from recommender.services.access.tokens import create_token

    _odd_fleet()
    _, key = create_token(
        name="t", scope="read", created_by=None, now=datetime.now(UTC)
    )
    client = token_client(key)
    client.get("/api/v1/workloads/")  # the token's last use is written once
    ordering = {
        "": None,
        "&ordering=-savings_monthly,name": ["-savings_monthly", "name"],
    }
    expected = WorkloadSerializer(
        filter_workloads(workload_queryset(), {"ordering": ordering[query]}), many=True
    ).data
    for limit in (1, 3, 1000):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(f"/api/v1/workloads/?limit={limit}{query}")
        assert response.status_code == 200
        assert response.json()["results"] == _rendered_json(expected[:limit])
        fewest, most = queries_expected
        assert fewest <= len(queries) <= most, [q["sql"][:80] for q in queries]


def _rendered_json(data: Any) -> Any:
    import json

    return json.loads(_rendered(data))
