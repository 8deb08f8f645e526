"""The admission snapshot's full rebuild costs the same on every page: a constant
number of statements per page, and on PostgreSQL a number of rows read per page that
does not grow with the page's position or the fleet."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from recommender.models import Cluster, Policy, Workload
from recommender.services.admission import snapshot as snapshot_module
from recommender.services.admission.snapshot import load_snapshot
from recommender.services.readmodels.generation import note_admission_changes

pytestmark = pytest.mark.django_db

PAGE = 20


def fleet(workloads: int) -> Cluster:
    """A cluster of ``workloads`` workloads, each with a policy (every fifth acted on),
    beside another cluster of as many, interleaved by id."""
    clusters = [
        Cluster.objects.create(name=f"pages-{workloads}-{n}", kind="simulated")
        for n in range(2)
    ]
    rows = Workload.objects.bulk_create(
        Workload(
            cluster=clusters[i % 2],
            kind=Workload.Kind.DEPLOYMENT,
            namespace=f"ns-{i % 7}",
            name=f"app-{i}",
            replicas=1,
            selector={},
            labels={},
        )
        for i in range(2 * workloads)
    )
    Policy.objects.bulk_create(
        Policy(
            workload=w,
            mode=Policy.Mode.INITIAL if i % 5 == 0 else Policy.Mode.OFF,
        )
        for i, w in enumerate(rows)
    )
    return clusters[0]


def rows_read(sql: str) -> int:
    """Rows the plan of one statement read (returned or filtered out, every loop)."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
        (plan,) = cursor.fetchone()
    if isinstance(plan, str):
        plan = json.loads(plan)

    def walk(node: dict[str, Any]) -> int:
        own = 0
        if "Scan" in node["Node Type"]:
            own = (
                node["Actual Rows"]
                + node.get("Rows Removed by Filter", 0)
                + node.get("Rows Removed by Index Recheck", 0)
            ) * node["Actual Loops"]
        return own + sum(walk(child) for child in node.get("Plans", ()))

    return walk(plan[0]["Plan"])


def pages_of_a_rebuild(monkeypatch, workloads: int) -> list[list[str]]:
    """The statements of a full rebuild of a fleet, page by page (the statements
    before each pause)."""
    monkeypatch.setattr(snapshot_module, "CHUNK", PAGE)
    cluster = fleet(workloads)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    ends: list[int] = []
    with CaptureQueriesContext(connection) as queries:
        snapshot = load_snapshot(
            cluster=cluster, pause=lambda: ends.append(len(queries.captured_queries))
        )
    assert len(snapshot.workloads) == workloads
    statements = [q["sql"] for q in queries.captured_queries]
    return [statements[a:b] for a, b in zip([0, *ends], ends, strict=False)][1:]


def test_every_page_of_a_full_rebuild_issues_the_same_statements(monkeypatch):
    small = pages_of_a_rebuild(monkeypatch, 60)
    large = pages_of_a_rebuild(monkeypatch, 300)
    assert len(small) >= 2 and len(large) >= 14
    # The first page also reads what every page shares (kill switch, LimitRanges,
    # nodes); every other page the same few statements, whatever the fleet.
    counts = {len(page) for page in small[1:] + large[1:]}
    assert len(counts) == 1 and counts.pop() <= 6, [len(p) for p in large]


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="EXPLAIN ANALYZE row counts"
)
def test_every_page_of_a_full_rebuild_reads_about_as_many_rows_as_it_returns(
    monkeypatch,
):
    for workloads in (1000, 3000):
        pages = pages_of_a_rebuild(monkeypatch, workloads)
        # The second page, the middle one and the last one.
        sampled = [pages[1], pages[len(pages) // 2], pages[-1]]
        read = [sum(rows_read(sql) for sql in page) for page in sampled]
        # A page returns PAGE workloads (and reads as many of the other cluster's,
        # interleaved); a join that scans from the start reads every earlier row.
        assert max(read) <= 8 * PAGE, (workloads, read)


@pytest.mark.parametrize("paced", [True, False])
def test_a_reload_nothing_waits_on_reads_in_large_pages(monkeypatch, paced):
    """The webhook's background thread reloads in small paced pages; a reload
    nothing waits on (the simulated cluster's admission inside a refresh) reads the
    fleet in a few large ones, and both hold the same workloads."""
    monkeypatch.setattr(snapshot_module, "CHUNK", PAGE)
    monkeypatch.setattr(snapshot_module, "UNPACED_CHUNK", 5 * PAGE)
    monkeypatch.setattr(snapshot_module, "MAX_PAUSE_S", 0.0)
    cluster = fleet(300)
    holder = snapshot_module.SnapshotHolder(cluster.name)
    with CaptureQueriesContext(connection) as queries:
        snapshot = holder.refresh(paced=paced)
    assert len(snapshot.workloads) == 300
    pages = sum(
        1
        for q in queries.captured_queries
        if 'FROM "recommender_workload"' in q["sql"] and "LIMIT" in q["sql"]
    )
    # 300 workloads (and an empty page after the last): 16 pages paced, 4 not.
    assert pages == (16 if paced else 4), pages


def test_an_unpaced_reload_of_changed_workloads_reads_them_in_one_statement(
    monkeypatch,
):
    """The simulated cluster's admission inside a refresh reloads the workloads the
    cycle before changed (13,854 at 100,000 containers: 3 pages of 5,000) in one
    statement; the webhook's paced thread still reads them in small pages."""
    monkeypatch.setattr(snapshot_module, "CHUNK", PAGE)
    monkeypatch.setattr(snapshot_module, "UNPACED_CHUNK", 5 * PAGE)
    monkeypatch.setattr(snapshot_module, "MAX_PAUSE_S", 0.0)
    cluster = fleet(1000)
    changed = list(
        Workload.objects.filter(cluster=cluster).values_list("pk", flat=True)[:240]
    )
    for paced, expected in ((False, 1), (True, 12)):
        holder = snapshot_module.SnapshotHolder(cluster.name)
        holder.refresh(paced=paced)
        note_admission_changes(cluster_id=cluster.pk, workload_ids=changed)
        with CaptureQueriesContext(connection) as queries:
            snapshot = holder.refresh(paced=paced)
        assert snapshot.reloaded == len(changed)
        # The reload's reads of workloads by id (the advice's own reads aside).
        reads = [
            q
            for q in queries.captured_queries
            if q["sql"].startswith('SELECT "recommender_workload"."id" AS "pk"')
            and '"recommender_workload"."id" IN (' in q["sql"]
        ]
        assert len(reads) == expected, (paced, len(reads))
