"""Dashboard query counts are fixed: they don't grow with the fleet (no N+1)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from recommender.models import (
    AuditEvent,
    Cluster,
    OomKill,
    Policy,
    RefreshRun,
    ResizeChange,
)
from recommender.services.operations.retention import HISTORIES
from recommender.services.readmodels import namespace_totals
from tests.factories import make_cluster, make_recommendation, make_workload

# The runs page: 7, + the storage panel's query per growing table and one for their
# sizes (PostgreSQL).
RUNS_PAGE_QUERIES = 7 + sum(history.on_panel for history in HISTORIES) + 1

MI = 2**20


def _grow(count: int, *, start: int = 0) -> None:
    cluster = make_cluster(f"c{start}")
    for i in range(start, start + count):
        workload = make_workload(
            cluster,
            f"w{i}",
            namespace=f"ns{i % 3}",
            containers={
                "app": {
                    "request_cpu_millicores": 500,
                    "request_memory_bytes": 512 * MI,
                },
                "sidecar": {
                    "request_cpu_millicores": 50,
                    "request_memory_bytes": 64 * MI,
                },
            },
        )
        Policy.objects.filter(workload=workload).update(mode="Recreate")
        for container in workload.containers.all():
            make_recommendation(
                container, cpu_millicores=100 + i, memory_bytes=100 * MI
            )
            make_recommendation(container, cpu_millicores=120 + i, memory_bytes=90 * MI)
            OomKill.objects.create(
                container=container, pod=f"w{i}-0", occurred_at=timezone.now()
            )
        ResizeChange.objects.create(workload=workload, pod=f"w{i}-0")
        AuditEvent.objects.create(
            action="policy.update", workload=workload, message=f"e{i}"
        )
        RefreshRun.objects.create(
            cluster=cluster, status="succeeded", finished_at=timezone.now()
        )
    # A running back-fill: the overview and the runs page draw its progress bar.
    RefreshRun.objects.create(
        cluster=cluster, kind="backfill", shard="ns0", status="running", progress=0.5
    )


def _count(client, path: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path)
    assert response.status_code == 200, path
    return len(queries)


# Every page's header reads the safety state (kill switch, paused clusters): one query.
PAGES = {
    # + the admission webhook counts, the enabled clusters (whether each is
    # stored, its VPA objects without a target, its missing OOM history), the
    # failing clusters (one query when none fails), the realized savings' changes,
    # the updater leases, the node pools and the namespaces' savings (the list's,
    # summed: whether the stored group sums serve, the sums) and the at-risk
    # candidates' savings; what the savings are priced at comes with the
    # namespaces' totals
    "/": 22,
    # session, user, role; the rollup, the trend, the cluster names; the header;
    # the realized savings' changes; the node pools; whether the stored amounts are
    # complete
    "/rollups/?by=label": 10,
    # the rows per cluster, the page's ids from its first cluster, those between and
    # its last (SPANNED), the clusters whose namespaces are stored
    "/workloads/": 14,
    "/workloads/?status=over&sort=savings": 11,
    # the groups' count, the page's groups, their pods, their rejection reasons
    "/changes/": 10,
    "/audit/": 8,
    "/runs/": RUNS_PAGE_QUERIES,
    "/runs/?kind=backfill&status=running": RUNS_PAGE_QUERIES,
}


# Pages whose queries grow with the clusters a page spans, up to a bound: the list
# in name order reads the ids of a page's first and last cluster apart and those
# between in one query.
SPANNED = {"/workloads/": 2}


@pytest.mark.parametrize(("path", "limit"), PAGES.items())
def test_list_pages_have_bounded_queries(
    viewer_client, db, path, limit, django_assert_max_num_queries
):
    _grow(3)
    small = _count(viewer_client, path)
    _grow(12, start=100)
    _grow(2, start=200)
    _grow(12, start=300)

    with django_assert_max_num_queries(limit):
        response = viewer_client.get(path)

    assert response.status_code == 200
    # More rows, same queries (a few more for more clusters spanned, SPANNED).
    assert small <= _count(viewer_client, path) <= small + SPANNED.get(path, 0)


def test_workload_page_has_bounded_queries(
    viewer_client, db, django_assert_max_num_queries
):
    _grow(2)
    workload = make_workload(
        make_cluster("big"),
        "many",
        containers={f"c{i}": {"request_cpu_millicores": 100} for i in range(6)},
    )
    for container in workload.containers.all():
        for n in range(5):
            make_recommendation(container, cpu_millicores=100 + n)

    # 15: the cluster's largest nodes (no request a node cannot hold) is one, the
    # requests its live pods carry another.
    with django_assert_max_num_queries(15):
        response = viewer_client.get(f"/workloads/{workload.pk}/")

    assert response.status_code == 200


def test_workload_page_with_overrides_and_the_editor_has_bounded_queries(
    operator_client, db, django_assert_max_num_queries
):
    """An operator sees the policy editor; overrides add no query per container."""

    def page(containers: int) -> int:
        workload = make_workload(
            make_cluster(f"ov{containers}"),
            "many",
            containers={
                f"c{i}": {"request_cpu_millicores": 100} for i in range(containers)
            },
        )
        Policy.objects.filter(workload=workload).update(
            profile_overrides={"cpu_target_percentile": 0.95, "cpu_half_life_s": 3600.0}
        )
        for container in workload.containers.all():
            make_recommendation(container, cpu_millicores=100)
        with django_assert_max_num_queries(15):
            body = operator_client.get(f"/workloads/{workload.pk}/").content.decode()
        assert "CPU target percentile p90 → p95" in body
        assert 'name="ov-cpu_target_percentile" value="0.95"' in body
        return _count(operator_client, f"/workloads/{workload.pk}/")

    assert page(1) == page(6)


def test_charts_fragment_has_bounded_queries(
    viewer_client, db, django_assert_max_num_queries
):
    workload = make_workload(
        make_cluster("charts"),
        "many",
        containers={f"c{i}": {"request_cpu_millicores": 100} for i in range(6)},
    )
    for container in workload.containers.all():
        OomKill.objects.create(
            container=container, pod="many-0", occurred_at=timezone.now()
        )

    with django_assert_max_num_queries(8):
        response = viewer_client.get(f"/workloads/{workload.pk}/charts")

    assert response.status_code == 200


@pytest.mark.django_db
def test_users_page_labels_roles_with_role_of_in_fixed_queries(admin_client_):
    from recommender.roles import Role
    from tests.factories import make_user

    def page_queries() -> tuple[int, str]:
        with CaptureQueriesContext(connection) as queries:
            body = admin_client_.get("/users/").content.decode()
        return len(queries), body

    make_user("olga", Role.OPERATOR)
    few, body = page_queries()
    for i in range(5):
        make_user(f"viewer{i}", Role.VIEWER)
    many, body = page_queries()

    assert few == many
    assert body.count("<td>operator</td>") == 1
    assert body.count("<td>viewer</td>") == 5
    assert body.count("<td>admin</td>") == 1


@pytest.mark.parametrize(
    "path", ["/", "/rollups/?by=label", "/rollups/?by=namespace", "/workloads/"]
)
def test_pages_read_from_stored_totals_have_bounded_queries(viewer_client, db, path):
    # As a refresh leaves them: every cluster's totals, facts and group sums stored.
    def grown(count: int, start: int) -> int:
        _grow(count, start=start)
        for cluster in Cluster.objects.all():
            namespace_totals.store(cluster=cluster, now=timezone.now())
        return _count(viewer_client, path)

    small = grown(3, 0)
    assert grown(12, 100) <= small + SPANNED.get(path, 0)
    assert grown(12, 300) <= small + SPANNED.get(path, 0)


# The overview as a refresh leaves it, every workload OOM-killed (more than the ten
# at-risk rows): none for the at-risk candidates' savings (the namespaces' savings
# read those of the OOM-killed workloads one by one already).
STORED_OVERVIEW_QUERIES = 19


def test_the_overview_from_stored_totals_runs_few_statements_none_twice(
    viewer_client, db
):
    # Whether every cluster is stored is read once with the clusters, not asked
    # again by each reader (the totals, the namespaces' savings, the candidates').
    _grow(12)
    for cluster in Cluster.objects.all():
        namespace_totals.store(cluster=cluster, now=timezone.now())

    with CaptureQueriesContext(connection) as queries:
        response = viewer_client.get("/")

    assert response.status_code == 200
    statements = [query["sql"] for query in queries]
    assert sorted(s for s in statements if statements.count(s) > 1) == []
    assert len(statements) <= STORED_OVERVIEW_QUERIES
    # The OOM-killed workloads fill the at-risk rows: the stored shortfalls of
    # every workload (tens of thousands in a large fleet) are counted, not read.
    assert not [s for s in statements if '"shortfalls"' in s]
