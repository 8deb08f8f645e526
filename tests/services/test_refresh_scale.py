"""A refresh cycle's cost follows what changed, not the size of the fleet."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils.safestring import SafeString

from recommender.models import (
    AdmissionCount,
    Checkpoint,
    Cluster,
    Container,
    NamespaceTotals,
    OomKill,
    Recommendation,
    RefreshRun,
    Workload,
    WorkloadPod,
    bulk,
)
from recommender.services.admission import snapshot as snapshot_module
from recommender.services.admission.snapshot import load_snapshot
from recommender.services.connections import cluster_adapter_for
from recommender.services.operations import runs
from recommender.services.readmodels.pod_owners import POD_RETENTION, load_pod_owners
from recommender.services.refresh import (
    cycle,
    discovery,
    ingest,
    ooms,
    pods,
    warm_state,
)
from recommender.services.refresh.cycle import refresh_cluster

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def statements_of_a_steady_cycle(settings, workloads: int) -> tuple[int, Counter[str]]:
    settings.SIMULATION_WORKLOADS = workloads
    settings.SIMULATION_HISTORY_DAYS = 0.25
    cluster = Cluster.objects.create(name=f"fleet-{workloads}", kind="simulated")
    first = refresh_cluster(cluster_id=cluster.pk, now=NOW)
    assert first.status == RefreshRun.Status.SUCCEEDED, first.error
    # One minute on: new samples for every container, nothing else changed.
    with CaptureQueriesContext(connection) as queries:
        run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    assert run.counts["samples"] > 0
    # The cycle went over every workload, container and checkpoint of the fleet.
    checkpoints = Checkpoint.objects.filter(container__workload__cluster=cluster)
    assert run.counts["workloads"] == workloads
    assert run.counts["containers"] == checkpoints.count() > workloads
    assert run.counts["checkpoints_deferred"] == checkpoints.count()
    kinds: Counter[str] = Counter(
        re.sub(r"\d+", "N", re.sub(r"\s+", " ", q["sql"]))[:100]
        for q in queries.captured_queries
    )
    return len(queries.captured_queries), kinds


@pytest.mark.django_db
@pytest.mark.parametrize("batch", [None, 5])
def test_an_unchanged_cycle_issues_the_same_statements_whatever_the_fleet(
    settings, monkeypatch, batch
):
    if batch is not None:
        # Batches of 5 rows instead of 500 (2,000 for compare-and-swap): a statement
        # per batch of workloads, containers, pods or checkpoints shows up as growth
        # between these two fleets, as it would between 1,000 and 100,000 containers.
        for module in (discovery, ingest):
            monkeypatch.setattr(module, "BATCH", batch)
        for module in (bulk, cycle):
            monkeypatch.setattr(module, "CAS_BATCH", batch)
    small, small_kinds = statements_of_a_steady_cycle(settings, 12)
    large, large_kinds = statements_of_a_steady_cycle(settings, 60)
    grown = {
        k: (small_kinds[k], n) for k, n in large_kinds.items() if n > small_kinds[k]
    }
    assert large == small, "\n".join(f"{v} {k}" for k, v in grown.items())
    # 40 (38 on PostgreSQL): the cycle's reads and writes, among them the read
    # models of the workloads it changed (readmodels/changes.py; eleven statements,
    # ten on PostgreSQL: the next test) and the rollups' group sums (a delete and an
    # insert, one statement on PostgreSQL), the webhook's journal of changed
    # workloads (one insert) and its counts (one upsert), the simulated cluster's
    # HPAs and workload annotations as its writer left them, the policy rules and
    # namespace labels, the batch workloads' running hours (their runs and rows in
    # one read, the stored history's figures in one; read once: a pass that stores
    # no first contact's history reads them before ingest only), the savings
    # snapshot's hourly check (the first cycle's commit is not run here) and the
    # test's own savepoints (6). Discovery reads the stored workloads once when it
    # writes none of them (the pods' owners by name among them), and its read of the
    # containers tells which checkpoints have no watermark yet; a whole-cluster pass
    # reads the cluster's columns it compares as it sets the cluster's last
    # discovery.
    assert large <= (38 if connection.vendor == "postgresql" else 40), large_kinds


@pytest.mark.django_db
def test_a_steady_cycle_keeps_the_read_models_current_in_few_statements(
    settings, django_capture_on_commit_callbacks
):
    """The upkeep of a steady cycle (phases totals and savings_snapshot): the
    cluster's row claimed; the changed workloads' latest kills and parts computed
    (two reads) and the stored rows of the other workloads of their namespaces
    (one); their rows written (two upserts); their namespaces' sums and first
    containers without data (one read) and rows (one upsert); the group sums read,
    then deleted and written (one statement on PostgreSQL, two elsewhere).
    The hour's savings snapshot, which the first cycle took and committed, is not
    looked for again."""
    settings.SIMULATION_WORKLOADS = 12
    settings.SIMULATION_HISTORY_DAYS = 0.25
    cluster = Cluster.objects.create(name="upkeep", kind="simulated")
    with django_capture_on_commit_callbacks(execute=True):
        first = refresh_cluster(cluster_id=cluster.pk, now=NOW)
    assert first.status == RefreshRun.Status.SUCCEEDED, first.error

    with statements_in_phases() as phases:
        run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))

    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    assert run.counts["recommendations_changed"] > 0  # workloads to recompute
    upkeep = 10 if connection.vendor == "postgresql" else 11
    assert (phases["totals"], phases["savings_snapshot"]) == (upkeep, 0), phases


@contextlib.contextmanager
def statements_in_phases() -> Iterator[Counter[str]]:
    """The statements of the block by the run phase that issued them (the server's
    own: a test's savepoints left out)."""
    where: list[str] = []
    original = runs.Phases.__call__

    @contextlib.contextmanager
    def tracked(self, name):  # type: ignore[no-untyped-def]
        where.append(name)
        try:
            with original(self, name):
                yield
        finally:
            where.pop()

    phases: Counter[str] = Counter()

    def count(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        if "SAVEPOINT" not in sql:
            phases[where[-1] if where else "outside any phase"] += 1
        return execute(sql, params, many, context)

    with (
        pytest.MonkeyPatch.context() as patch,
        connection.execute_wrapper(count),
    ):
        patch.setattr(runs.Phases, "__call__", tracked)
        yield phases


def statements_by_phase(settings, workloads: int) -> tuple[Counter[str], int]:
    """The statements of a steady cycle by the phase that issued them (the server's
    own: a test's savepoints left out), and the windows it ran."""
    settings.SIMULATION_WORKLOADS = workloads
    settings.SIMULATION_HISTORY_DAYS = 0.25
    cluster = Cluster.objects.create(name=f"windows-{workloads}", kind="simulated")
    first = refresh_cluster(cluster_id=cluster.pk, now=NOW)
    assert first.status == RefreshRun.Status.SUCCEEDED, first.error
    with statements_in_phases() as phases:
        run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    assert run.counts["samples"] > 0
    # The webhook's full rebuild after it, in pages of 5 workloads: the statements
    # of each page after the first (which also reads what every page shares).
    ends: list[int] = []
    with CaptureQueriesContext(connection) as queries:
        load_snapshot(
            cluster=cluster, pause=lambda: ends.append(len(queries.captured_queries))
        )
    pages = Counter(b - a for a, b in itertools.pairwise(ends))
    phases.update({f"snapshot page x{n}": 1 for n in pages})
    return phases, run.counts.get("steady_windows", 1), sum(pages.values()) + 1


@pytest.mark.django_db
def test_each_phase_issues_the_same_statements_whatever_the_fleet_and_windows(
    settings, monkeypatch
):
    """A steady cycle in windows by namespace (a namespace of 2 containers or more
    is a window of its own): each phase issues as many statements for 12 workloads
    as for 60, however many windows each has (the windows share their rows' read
    and the OOM history's); every page of the webhook's full rebuild after it, as
    many for either."""
    settings.STEADY_WINDOW_CONTAINERS = 8
    for module in (discovery, ingest):
        monkeypatch.setattr(module, "BATCH", 5)
    for module in (bulk, cycle):
        monkeypatch.setattr(module, "CAS_BATCH", 5)
    monkeypatch.setattr(snapshot_module, "CHUNK", 5)
    small, small_windows, small_pages = statements_by_phase(settings, 12)
    large, large_windows, large_pages = statements_by_phase(settings, 60)
    assert 1 < small_windows < large_windows
    assert 2 < small_pages < large_pages
    assert large == small, (small, large)


def test_deferred_checkpoints_lose_and_double_count_nothing(settings, db):
    """Cycles a minute apart write checkpoints only once they are due; the samples
    of the cycles between are read again, so the result equals writing every time."""
    settings.SIMULATION_WORKLOADS = 12
    settings.SIMULATION_HISTORY_DAYS = 0.25
    every = Cluster.objects.create(name="every-cycle", kind="simulated")
    scheduled = Cluster.objects.create(name="scheduled", kind="simulated")
    runs = {}
    for cluster, interval_s in ((every, 0), (scheduled, 300)):
        settings.CHECKPOINT_INTERVAL_S = interval_s
        runs[cluster.name] = [
            refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=m))
            for m in range(0, 11)
        ]
    written = [r.counts["checkpoints_written"] for r in runs["scheduled"]]
    deferred = [r.counts["checkpoints_deferred"] for r in runs["scheduled"]]
    containers = runs["scheduled"][0].counts["containers"]
    assert written[0] == containers  # first contact: every one
    assert written[1:5] == [0, 0, 0, 0] and deferred[1:5] == [containers] * 4
    assert written[5] == containers  # due after 5 minutes
    assert all(
        r.counts["checkpoints_written"] == containers for r in runs["every-cycle"]
    )
    # Minute 10 wrote both fleets' checkpoints: the same samples, counted once.
    assert written[10] == containers
    state = {
        name: sorted(
            (
                c.container.workload.name,
                c.container.name,
                bytes(c.state),
                c.sample_count,
            )
            for c in Checkpoint.objects.filter(
                container__workload__cluster__name=name
            ).select_related("container__workload")
        )
        for name in ("every-cycle", "scheduled")
    }
    assert state["every-cycle"] == state["scheduled"]
    latest = {
        name: sorted(
            (c.workload.name, c.name, c.latest_recommendation.values_tuple())
            for c in Container.objects.filter(
                workload__cluster__name=name, latest_recommendation__isnull=False
            ).select_related("workload", "latest_recommendation")
        )
        for name in ("every-cycle", "scheduled")
    }
    assert latest["every-cycle"] == latest["scheduled"]


@pytest.mark.django_db
def test_a_cycle_saves_the_admissions_of_its_new_pods_in_one_flush(settings):
    """The simulated cluster's new pods go through the webhook's service; their
    counts are saved once per discovery pass, not one statement per pod (11 UPDATEs
    a minute at 10,000 containers, about ten times that at 100,000)."""
    settings.SIMULATION_WORKLOADS = 600
    settings.SIMULATION_HISTORY_DAYS = 0.01
    cluster = Cluster.objects.create(name="admissions", kind="simulated")
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    for minute in range(1, 61):
        before = sum(AdmissionCount.objects.values_list("count", flat=True))
        with CaptureQueriesContext(connection) as queries:
            run = refresh_cluster(
                cluster_id=cluster.pk, now=NOW + timedelta(minutes=minute)
            )
        assert run.status == RefreshRun.Status.SUCCEEDED, run.error
        admitted = sum(AdmissionCount.objects.values_list("count", flat=True)) - before
        if admitted >= 3:
            break
    else:
        pytest.fail("no minute admitted 3 pods or more")
    touching = [
        q["sql"] for q in queries.captured_queries if "admissioncount" in q["sql"]
    ]
    outcomes = AdmissionCount.objects.values("outcome").distinct().count()
    # One update (and a create when the minute's row is new) per outcome, not a
    # statement (or two) per pod.
    assert len(touching) <= 2 * outcomes, touching
    assert len(touching) < admitted, touching


def _stored(cluster_name: str) -> tuple[list[tuple], list[tuple], list[tuple]]:
    """Checkpoints, recommendation and OOM kill rows of a cluster, by workload and
    container names (two clusters of the simulation run the same fleet)."""
    checkpoints = sorted(
        (
            c.container.workload.name,
            c.container.name,
            bytes(c.state),
            c.sample_count,
            c.version,
            c.last_sample_at,
        )
        for c in Checkpoint.objects.filter(
            container__workload__cluster__name=cluster_name
        ).select_related("container__workload")
    )
    recommendations = sorted(
        (r.container.workload.name, r.container.name, r.created_at, r.values_tuple())
        for r in Recommendation.objects.filter(
            container__workload__cluster__name=cluster_name
        ).select_related("container__workload")
    )
    kills = sorted(
        OomKill.objects.filter(
            container__workload__cluster__name=cluster_name
        ).values_list(
            "container__workload__name", "container__name", "pod", "occurred_at"
        )
    )
    return checkpoints, recommendations, kills


def test_a_warm_worker_stores_what_a_cold_one_does(settings, db):
    """A worker that keeps its engine rows between cycles (warm_state) neither
    decodes its checkpoints nor reads again the minutes since their watermark, and
    stores byte for byte what a worker starting cold every cycle stores."""
    settings.SIMULATION_WORKLOADS = 12
    settings.SIMULATION_HISTORY_DAYS = 0.25
    settings.CHECKPOINT_INTERVAL_S = 300
    runs = {}
    for name in ("warm", "cold"):
        cluster = Cluster.objects.create(name=name, kind="simulated")
        runs[name] = []
        for minute in range(0, 11):
            if name == "cold":
                warm_state.forget_all()  # as a restarted process, every minute
            runs[name].append(
                refresh_cluster(
                    cluster_id=cluster.pk, now=NOW + timedelta(minutes=minute)
                )
            )
    containers = runs["warm"][0].counts["containers"]
    kept = [r.counts["engine_rows_kept"] for r in runs["warm"]]
    assert kept == [0] + [containers] * 10
    assert all(r.counts["engine_rows_kept"] == 0 for r in runs["cold"])
    # Minutes 1-4 deferred every checkpoint: the cold worker read those minutes
    # again each cycle, the warm one only the new one.
    warm_samples = [r.counts["samples"] for r in runs["warm"][1:5]]
    cold_samples = [r.counts["samples"] for r in runs["cold"][1:5]]
    assert cold_samples == [n * (m + 1) for m, n in enumerate(warm_samples[:1] * 4)]
    assert runs["warm"][10].counts["checkpoints_written"] == containers
    assert _stored("warm") == _stored("cold")


def _oldest_kill_looked_up(queries: CaptureQueriesContext) -> datetime | None:
    """The oldest time from which a cycle read stored OOM kills back to tell the
    new ones (None: it read none)."""
    found = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith('SELECT "recommender_oomkill"."container_id"')
    ]
    if not found:
        return None
    (sql,) = found
    at = re.search(r'"occurred_at" >=? \'(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)', sql)
    return datetime.fromisoformat(at.group(1)).replace(tzinfo=UTC)


def test_a_warm_worker_looks_up_only_the_kills_it_has_not_seen_stored(settings, db):
    """The simulated cluster reports nine days of OOM kills every cycle: a cold
    worker reads the stored kills back from the oldest reported to find the new
    ones; a warm one skips those its last window saw stored and looks up only the
    rest. Both store the same kills (test above)."""
    settings.SIMULATION_WORKLOADS = 12
    settings.SIMULATION_HISTORY_DAYS = 0.25
    cluster = Cluster.objects.create(name="kills", kind="simulated")
    first = refresh_cluster(cluster_id=cluster.pk, now=NOW)
    assert first.counts["oom_kills_new"] > 0
    scope = (cluster.pk, None)
    oldest = {}
    for minute, name in ((1, "cold"), (2, "warm")):
        if name == "cold":
            warm_state.forget_all()
        with CaptureQueriesContext(connection) as queries:
            refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=minute))
        oldest[name] = _oldest_kill_looked_up(queries)
    stored = {
        (ns, pod, container, at)
        for ns, pod, container, at in OomKill.objects.filter(
            container__workload__cluster=cluster
        ).values_list(
            "container__workload__namespace", "pod", "container__name", "occurred_at"
        )
    }
    known = warm_state.stored_kills(scope)
    assert known and known <= stored
    assert oldest["cold"] is not None
    assert oldest["cold"] < NOW - timedelta(days=1)
    # The warm cycle looked up none, or only kills newer than its last window.
    assert oldest["warm"] is None or oldest["warm"] > NOW


def test_a_kept_row_another_writer_moved_on_is_read_from_the_database(settings, db):
    """A checkpoint written by someone else (another worker, an expiry reset) since
    this process kept its row: the stored one is used, not the kept one."""
    settings.SIMULATION_WORKLOADS = 12
    settings.SIMULATION_HISTORY_DAYS = 0.25
    settings.CHECKPOINT_INTERVAL_S = 300
    cluster = Cluster.objects.create(name="moved", kind="simulated")
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))
    assert warm_state.count() > 0
    other = Checkpoint.objects.filter(container__workload__cluster=cluster).first()
    Checkpoint.objects.filter(pk=other.pk).update(version=F("version") + 1)
    run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=2))
    assert run.counts["engine_rows_kept"] == run.counts["containers"] - 1


def test_kept_rows_of_vanished_containers_are_forgotten(settings, db):
    """A window forgets the rows its scope kept before and it did not take (vanished
    workloads), a whole-cluster window those of every shard of its cluster; a shard
    leaves the other namespaces' rows alone."""
    settings.SIMULATION_WORKLOADS = 12
    settings.SIMULATION_HISTORY_DAYS = 0.25
    cluster = Cluster.objects.create(name="vanish", kind="simulated")
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))
    assert warm_state.count() == run.counts["containers"]
    namespace = (
        Workload.objects.filter(cluster=cluster).order_by("pk").first().namespace
    )
    shard = refresh_cluster(
        cluster_id=cluster.pk, now=NOW + timedelta(minutes=2), namespace=namespace
    )
    assert 0 < shard.counts["engine_rows_kept"] < run.counts["containers"]
    assert warm_state.count() == run.counts["containers"]

    settings.SIMULATION_WORKLOADS = 6  # half the fleet is gone
    smaller = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=3))
    assert smaller.counts["containers"] < run.counts["containers"]
    assert warm_state.count() == smaller.counts["containers"]


def test_inserted_rows_get_their_own_primary_keys_in_every_batch(db):
    """insert_returning_pks, a few rows a statement: each object gets the key of the
    row holding its values (the cycle moves the containers' pointers to them)."""
    cluster = Cluster.objects.create(name="keys", kind="simulated")
    workload = cluster.workloads.create(
        kind="Deployment",
        namespace="ns",
        name="api",
        first_seen_at=NOW,
        last_seen_at=NOW,
    )
    container = Container.objects.create(workload=workload, name="app")
    rows = [
        Recommendation(
            container=container,
            created_at=NOW + timedelta(minutes=i),
            target_cpu_millicores=100 + i,
            # Exact beyond a double's 53 bits; absent values stay absent.
            target_memory_bytes=2**62 + i,
            lower_memory_bytes=None,
            confidence=i / 7,
            explanation={
                "notes": [f"row {i}", 'with "quotes" and \\ backslash', "ü ✓ 中"],
                "nested": {"values": [1.5, None, True]},
            },
        )
        for i in range(7)
    ]
    with CaptureQueriesContext(connection) as queries:
        bulk.insert_returning_pks(
            rows,
            fields=[
                f.name
                for f in Recommendation._meta.concrete_fields
                if not f.primary_key
            ],
            batch=3,
        )
    assert len(queries.captured_queries) == 3  # 3 + 3 + 1 rows
    for i, row in enumerate(rows):
        stored = Recommendation.objects.get(pk=row.pk)
        assert stored.target_cpu_millicores == 100 + i
        assert stored.target_memory_bytes == 2**62 + i
        assert stored.lower_memory_bytes is None
        assert stored.confidence == pytest.approx(i / 7)
        assert stored.explanation == row.explanation
        assert stored.created_at == NOW + timedelta(minutes=i)


def test_new_rows_are_stored_and_pointed_at_where_the_pointer_is_as_expected(db):
    """insert_pointed: each new recommendation is stored with its own key and its
    container points at it, unless another writer moved the container's pointer
    since it was read: that one is not stored (and stays unsaved), the other
    writer's row stands. One statement on PostgreSQL; an insert, a compare-and-swap
    and the lost row's delete elsewhere."""
    cluster = Cluster.objects.create(name="swap", kind="simulated")
    workload = cluster.workloads.create(
        kind="Deployment", namespace="ns", name="api", first_seen_at=NOW
    )
    containers = [
        Container.objects.create(workload=workload, name=f"c{i}") for i in range(4)
    ]
    old = Recommendation.objects.create(container=containers[0], created_at=NOW)
    Container.objects.filter(pk=containers[0].pk).update(latest_recommendation=old)
    # Read as None, but another writer pointed the last container elsewhere since.
    raced = Recommendation.objects.create(container=containers[3], created_at=NOW)
    Container.objects.filter(pk=containers[3].pk).update(latest_recommendation=raced)
    expected = {c.pk: None for c in containers} | {containers[0].pk: old.pk}
    later = NOW + timedelta(minutes=1)
    rows = [
        Recommendation(
            container=c,
            created_at=later,
            target_cpu_millicores=100 + i,
            target_memory_bytes=2**62 + i,
            explanation={"notes": [f"row {i}", 'with "quotes"', "ü ✓ 中"]},
        )
        for i, c in enumerate(containers)
    ]
    fields = [f.name for f in Recommendation._meta.concrete_fields if not f.primary_key]
    with CaptureQueriesContext(connection) as queries:
        won = bulk.insert_pointed(
            rows,
            fields=fields,
            owner="container",
            pointer="latest_recommendation",
            expected=expected,
        )
    sql = [q["sql"].split(" ", 1)[0] for q in queries.captured_queries]
    if connection.vendor == "postgresql":
        assert sql == ["WITH"]
    else:
        assert sql[:2] == ["INSERT", "WITH"] and "DELETE" in sql
    assert won == {c.pk for c in containers[:3]}
    for i, (row, container) in enumerate(zip(rows[:3], containers, strict=False)):
        stored = Recommendation.objects.get(pk=row.pk)
        assert (stored.container_id, stored.target_cpu_millicores) == (
            container.pk,
            100 + i,
        )
        assert stored.target_memory_bytes == 2**62 + i
        assert stored.explanation == row.explanation
        assert not row._state.adding
    assert rows[3].pk is None and rows[3]._state.adding
    assert not Recommendation.objects.filter(container=containers[3], created_at=later)
    latest = dict(
        Container.objects.filter(workload=workload).values_list(
            "pk", "latest_recommendation"
        )
    )
    assert latest == {
        **{c.pk: r.pk for c, r in zip(containers[:3], rows, strict=False)},
        containers[3].pk: raced.pk,
    }
    with pytest.raises(ValueError, match="one Recommendation per container"):
        bulk.insert_pointed(
            [Recommendation(container=containers[0], created_at=NOW)] * 2,
            fields=fields,
            owner="container",
            pointer="latest_recommendation",
            expected=expected,
        )


def test_a_read_models_stale_rows_are_replaced_in_one_statement(db):
    """replace_rows: the stale rows are deleted, a new row whose unique key is
    stored sets that row's fields, the others are inserted (JSON as given); one
    statement on PostgreSQL, a delete and an insert elsewhere. A delete that can
    match nothing (an empty ``__in``) and no rows to write are fine."""
    cluster = Cluster.objects.create(name="replace", kind="simulated")
    for name in ("a", "b", "c"):
        NamespaceTotals.objects.create(
            cluster=cluster, namespace=name, computed_at=NOW, workloads=1
        )
    later = NOW + timedelta(minutes=1)
    rows = [
        NamespaceTotals(
            cluster=cluster,
            namespace=name,
            computed_at=later,
            workloads=workloads,
            shortfalls={"7": 12.5},
            first_without_data=[["api", "ü ✓"]],
        )
        for name, workloads in (("b", 20), ("d", 40))
    ]
    stale = NamespaceTotals.objects.filter(cluster=cluster, namespace__in=["a", "c"])
    with CaptureQueriesContext(connection) as queries:
        bulk.replace_rows(
            stale,
            rows,
            conflict=["cluster", "namespace"],
            update=["computed_at", "workloads", "shortfalls", "first_without_data"],
        )
    assert len(queries.captured_queries) == (
        1 if connection.vendor == "postgresql" else 2
    )
    stored = {
        t.namespace: (t.computed_at, t.workloads, t.shortfalls, t.first_without_data)
        for t in NamespaceTotals.objects.filter(cluster=cluster)
    }
    assert stored == {
        name: (later, workloads, {"7": 12.5}, [["api", "ü ✓"]])
        for name, workloads in (("b", 20), ("d", 40))
    }
    nothing = NamespaceTotals.objects.filter(cluster=cluster, namespace__in=[])
    bulk.replace_rows(
        nothing,
        [NamespaceTotals(cluster=cluster, namespace="e", computed_at=later)],
    )
    bulk.replace_rows(NamespaceTotals.objects.filter(namespace="b"), [])
    assert set(
        NamespaceTotals.objects.filter(cluster=cluster).values_list(
            "namespace", flat=True
        )
    ) == {"d", "e"}


def test_new_rows_are_inserted_as_given_and_a_conflicting_one_is_skipped(db):
    """insert_new, a few rows a statement: every column as given (JSON, bytes,
    times, absent values), and a row whose unique key is stored already is skipped,
    not raised, the stored row left as it was."""
    cluster = Cluster.objects.create(name="new-rows", kind="simulated")
    workload = cluster.workloads.create(
        kind="Deployment",
        namespace="ns",
        name="api",
        first_seen_at=NOW,
        last_seen_at=NOW,
    )
    stored = WorkloadPod.objects.create(
        cluster=cluster, workload=workload, namespace="ns", name="api-0", uid="old"
    )
    pods_given = [
        WorkloadPod(
            cluster=cluster,
            workload=workload,
            namespace="ns",
            name=f"api-{i}",
            uid=f"uid-{i}",
            containers={"app": {"requests": {"cpu": 100 + i}, "note": 'ü "q" \\'}},
            first_seen_at=NOW + timedelta(minutes=i),
            last_seen_at=NOW,
            started_at=None if i % 2 else NOW,
        )
        for i in range(7)
    ]
    containers = [Container(workload=workload, name=f"c{i}") for i in range(3)]
    bulk.insert_new(containers)
    rows = Container.objects.filter(workload=workload).order_by("name")
    checkpoints = [
        Checkpoint(container_id=pk, histogram_key="k", state=bytes([i, 0, 255]))
        for i, pk in enumerate(rows.values_list("pk", flat=True))
    ]
    with CaptureQueriesContext(connection) as queries:
        bulk.insert_new(pods_given, batch=3)
    if connection.vendor == "postgresql":
        assert len(queries.captured_queries) == 3  # 3 + 3 + 1 rows
    bulk.insert_new(checkpoints)
    assert WorkloadPod.objects.get(pk=stored.pk).uid == "old"
    for i, given in enumerate(pods_given[1:], start=1):
        row = WorkloadPod.objects.get(cluster=cluster, name=given.name)
        assert (row.uid, row.containers, row.first_seen_at, row.started_at) == (
            f"uid-{i}",
            given.containers,
            NOW + timedelta(minutes=i),
            given.started_at,
        )
    assert [c.name for c in rows] == ["c0", "c1", "c2"]
    assert sorted(
        bytes(state) for state in Checkpoint.objects.values_list("state", flat=True)
    ) == sorted(c.state for c in checkpoints)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's binding")
def test_a_json_document_is_bound_on_the_server_and_never_prepared(db):
    """The bulk writes' JSON document travels beside its statement, not quoted into
    its text (the server scanned 37 MB of new recommendations character by
    character), through Django's cursor wrapper (statement counts, error
    translation), and the statement is never prepared, however often it runs (a
    connection pooler in transaction mode would lose it)."""
    cluster = Cluster.objects.create(name="bound", kind="simulated")
    workload = cluster.workloads.create(
        kind="Deployment", namespace="ns", name="api", first_seen_at=NOW
    )
    marker = 'document-ü-"q"'
    # As a deployment whose DATABASES OPTIONS set prepare_threshold would have it
    # (Django's default prepares nothing): each statement run twice is prepared.
    connection.ensure_connection()
    raw = connection.connection
    threshold, raw.prepare_threshold = raw.prepare_threshold, 1
    try:
        with CaptureQueriesContext(connection) as queries:
            for i in range(8):
                bulk.insert_new(
                    [
                        WorkloadPod(
                            cluster=cluster,
                            workload=workload,
                            namespace="ns",
                            name=f"api-{i}",
                            uid=marker,
                            containers={"app": {"note": marker}},
                        )
                    ]
                )
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_prepared_statements")
                prepared = cursor.fetchone()
    finally:  # the connection serves the worker's later tests
        raw.prepare_threshold = threshold
    assert prepared == (0,)
    texts = [q["sql"] for q in queries.captured_queries][:8]
    assert all("$1" in text and "document-" not in text for text in texts), texts[0]
    assert (
        list(WorkloadPod.objects.filter(cluster=cluster).values_list("uid", flat=True))
        == [marker] * 8
    )
    # A database error comes out as Django's, as from any other statement.
    with pytest.raises(IntegrityError, match="name"), transaction.atomic():
        bulk.insert_new(
            [WorkloadPod(cluster=cluster, workload=workload, namespace="ns", name=None)]
        )


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's binding")
@pytest.mark.django_db(transaction=True)
def test_a_document_cursor_checks_the_connections_health_as_djangos_cursor_does():
    """With CONN_HEALTH_CHECKS on, a statement that carries a JSON document first
    replaces a connection that went away (as ``connection.cursor()`` does), instead of
    failing on it."""
    cluster = Cluster.objects.create(name="healthy", kind="simulated")
    workload = cluster.workloads.create(
        kind="Deployment", namespace="ns", name="api", first_seen_at=NOW
    )
    connection.ensure_connection()
    before = connection.health_check_enabled, connection.health_check_done
    connection.health_check_enabled, connection.health_check_done = True, False
    try:
        connection.connection.close()  # the server or a pooler dropped it
        bulk.insert_new(
            [
                WorkloadPod(
                    cluster=cluster,
                    workload=workload,
                    namespace="ns",
                    name="api-0",
                    containers={},
                )
            ]
        )
    finally:
        connection.health_check_enabled, connection.health_check_done = before
    assert list(WorkloadPod.objects.values_list("name", flat=True)) == ["api-0"]


def test_rows_are_sent_as_one_json_document_of_what_each_column_holds():
    """The JSON document of PostgreSQL's bulk writes (``bulk._json_rows``, encoded by
    msgspec): each column as it reads, a JSON column's NumPy numbers and str
    subclasses as their plain values and a non-finite float inside it as null (JSON
    has no NaN); a non-finite float in a column of its own raises, naming it."""
    containers = {
        "app": {
            "cpu": np.float64(0.5),
            "count": np.int64(3),
            "name": SafeString("app"),
            "gone": float("nan"),
            "pair": (1, 'ü "q" \\'),
        }
    }
    pod = WorkloadPod(
        cluster_id=4,
        workload_id=5,
        namespace="ns",
        name="api-0",
        uid="u",
        containers=containers,
        first_seen_at=NOW,
        last_seen_at=NOW,
        started_at=None,
    )
    columns = [
        WorkloadPod._meta.get_field(name)
        for name in ("cluster", "name", "containers", "first_seen_at", "started_at")
    ]
    sent = json.loads(bulk._json_rows([pod], columns, extra=[{"v_expect": 7}]))
    # As the backend writes the time (SQLite's column holds it naive, in UTC).
    at = datetime.fromisoformat(sent[0].pop("first_seen_at"))
    assert at.replace(tzinfo=UTC) == NOW
    assert sent == [
        {
            "v_expect": 7,
            "cluster_id": 4,
            "name": "api-0",
            "containers": {
                "app": {
                    "cpu": 0.5,
                    "count": 3,
                    "name": "app",
                    "gone": None,
                    "pair": [1, 'ü "q" \\'],
                }
            },
            "started_at": None,
        }
    ]
    rec = Recommendation(container_id=1, created_at=NOW, confidence=float("inf"))
    with pytest.raises(ValueError, match=r"Recommendation\.confidence: inf"):
        bulk._json_rows([rec], [Recommendation._meta.get_field("confidence")])


def test_many_rows_are_updated_batch_rows_a_statement_whatever_they_held(db):
    """``bulk.update_many`` sets each row's values (None too), ``batch`` rows a
    statement, and leaves the rows it is not given as they were."""
    cluster = Cluster.objects.create(name="update-many", kind="simulated")
    workloads = [
        cluster.workloads.create(
            kind="CronJob",
            namespace="ns",
            name=f"job-{i}",
            first_seen_at=NOW,
            last_seen_at=NOW,
            running_hours_month=float(i),
        )
        for i in range(4)
    ]
    hours = {workloads[0].pk: 12.5, workloads[1].pk: None, workloads[2].pk: 0.25}

    with CaptureQueriesContext(connection) as queries:
        written = bulk.update_many(
            Workload,
            rows=[(pk, {"running_hours_month": h}) for pk, h in hours.items()],
            batch=2,
        )

    assert written == 3
    assert len(queries.captured_queries) == 2
    stored = dict(
        Workload.objects.filter(cluster=cluster).values_list(
            "pk", "running_hours_month"
        )
    )
    assert stored == {**hours, workloads[3].pk: 3.0}


def test_a_stored_pod_is_rewritten_only_once_its_last_seen_time_is_due(settings, db):
    """An unchanged pod's row is left alone until its last-seen time is
    ``TOUCH_EVERY`` old; then the cycle that sees it moves that time on."""
    settings.SIMULATION_WORKLOADS = 12
    settings.SIMULATION_HISTORY_DAYS = 0.25
    cluster = Cluster.objects.create(name="touch", kind="simulated")
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    due, recent = WorkloadPod.objects.filter(cluster=cluster).order_by("pk")[:2]
    WorkloadPod.objects.filter(pk=due.pk).update(
        last_seen_at=NOW - pods.TOUCH_EVERY - timedelta(minutes=1)
    )
    WorkloadPod.objects.filter(pk=recent.pk).update(
        last_seen_at=NOW - timedelta(minutes=5)
    )
    later = NOW + timedelta(minutes=1)
    refresh_cluster(cluster_id=cluster.pk, now=later)
    due.refresh_from_db()
    recent.refresh_from_db()
    assert due.last_seen_at == later
    assert recent.last_seen_at == NOW - timedelta(minutes=5)


def test_checkpoints_due_wait_for_the_next_cycle_once_the_budget_is_spent(
    settings, db, monkeypatch
):
    """``VPAWEB_CHECKPOINTS_TIMEOUT_S`` holds within one group of rows (one histogram
    key: a whole fleet on upstream's profile): the due checkpoints are written a
    statement at a time until the budget is spent, the first always; the others keep
    their watermark and go in a later cycle, oldest first."""
    settings.SIMULATION_WORKLOADS = 12
    settings.SIMULATION_HISTORY_DAYS = 0.25
    settings.CHECKPOINT_INTERVAL_S = 60
    settings.CHECKPOINTS_TIMEOUT_S = 30
    monkeypatch.setattr(cycle, "CAS_BATCH", 5)
    # The store's clock: each statement of checkpoints takes 20 s on it.
    clock = [0.0]
    write = cycle._write_checkpoints

    def slow_write(parts, *args):
        clock[0] += 20.0 if any(rows for _, rows in parts) else 0.0
        return write(parts, *args)

    monkeypatch.setattr(cycle, "_write_checkpoints", slow_write)
    # The cycle's clock only (``cycle.time`` is the time module itself).
    monkeypatch.setattr(cycle, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    cluster = Cluster.objects.create(name="budget", kind="simulated")
    first = refresh_cluster(cluster_id=cluster.pk, now=NOW)
    containers = first.counts["containers"]
    assert first.counts["checkpoints_written"] == containers > 15
    # Every checkpoint is due a minute later: the first 5 go (the first statement
    # always does), 20 s on the clock; 5 more, at 40 s; then the 30 s budget is
    # spent.
    later = NOW + timedelta(minutes=2)
    run = refresh_cluster(cluster_id=cluster.pk, now=later)
    assert "oom_kills_new" not in run.counts  # no row is material this minute
    assert run.counts["checkpoints_written"] == 10
    assert run.counts["checkpoints_deferred"] == (
        containers - run.counts["checkpoints_written"]
    )
    written = Checkpoint.objects.filter(
        container__workload__cluster=cluster, updated_at=later
    ).count()
    assert written == run.counts["checkpoints_written"]
    # With time to spare, the rest go in the next cycle.
    settings.CHECKPOINTS_TIMEOUT_S = 3600
    rest = refresh_cluster(cluster_id=cluster.pk, now=later + timedelta(minutes=1))
    assert rest.counts["checkpoints_deferred"] == 0


def fleet_in_windows(settings, name: str) -> Cluster:
    """A simulated fleet of 60 workloads after its first contact, whose steady
    cycles run in windows by namespace (one of 8 containers or more each)."""
    settings.SIMULATION_WORKLOADS = 60
    settings.SIMULATION_HISTORY_DAYS = 0.25
    settings.STEADY_WINDOW_CONTAINERS = 8
    cluster = Cluster.objects.create(name=name, kind="simulated")
    first = refresh_cluster(cluster_id=cluster.pk, now=NOW)
    assert first.status == RefreshRun.Status.SUCCEEDED, first.error
    return cluster


@pytest.mark.django_db
def test_the_progress_of_every_window_but_the_last_is_stored_as_it_goes(
    settings, monkeypatch
):
    """However often progress may be stored, a steady cycle in windows stores it
    after each window but the last (its progress is the finished run's, stored with
    its counts): a statement a window less."""
    cluster = fleet_in_windows(settings, "progress")
    monkeypatch.setattr(cycle, "PROGRESS_EVERY_S", 0.0)
    later = NOW + timedelta(minutes=1)
    with CaptureQueriesContext(connection) as queries:
        run = refresh_cluster(cluster_id=cluster.pk, now=later)
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    windows = run.counts["steady_windows"]
    assert windows > 1
    shown = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith('UPDATE "recommender_refreshrun" SET "progress"')
    ]
    assert len(shown) == windows - 1
    assert RefreshRun.objects.get(pk=run.pk).progress == 1.0


@pytest.mark.django_db
def test_each_window_looks_through_the_pod_statuses_kills_of_its_namespaces_only(
    settings, monkeypatch
):
    """The pod statuses' OOM kills are split once among the windows by namespace:
    each window goes through its own, not through every kill of the cluster."""
    cluster = fleet_in_windows(settings, "kills-by-window")
    seen: list[tuple[set[str], list[str]]] = []
    original = ooms.attach_ooms

    def recording(window, *, snapshot_kills, history, **rest):  # type: ignore[no-untyped-def]
        namespaces = {
            key[0]
            for key, w in window.discovery.workload_by_key.items()
            if w in window.discovery.spec_names
        }
        seen.append((namespaces, [k.namespace for k in snapshot_kills]))
        return original(window, snapshot_kills=snapshot_kills, history=history, **rest)

    monkeypatch.setattr(ooms, "attach_ooms", recording)
    run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    assert run.counts["steady_windows"] == len(seen) > 1
    assert sum(len(kills) for _, kills in seen) > 0
    for namespaces, kills in seen:
        assert set(kills) <= namespaces, (namespaces, set(kills))


@pytest.mark.django_db
def test_the_windows_of_a_cycle_look_up_their_stored_kills_in_one_statement(
    settings, monkeypatch
):
    """The windows by namespace of a steady cycle look up the stored kills of the
    reported ones once, for every window (at 100,000 containers: 5 to 8 lookups a
    cycle before), and take from it what each would have read alone: the same
    kills stored, merged and waiting as windows that each read their own."""

    def cycle_of(
        name: str, *, cold: bool = False
    ) -> tuple[dict[str, int], int, list[tuple[Any, ...]]]:
        cluster = fleet_in_windows(settings, name)
        refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))
        # A warm worker that has not seen the last two hours' kills stored (another
        # worker stored them, or none did): every window has kills to look up; of
        # those, the last hour's are not stored yet.
        namespaces = set(
            Workload.objects.filter(cluster=cluster).values_list("namespace", flat=True)
        )
        scopes = [(cluster.pk, ns) for ns in (None, *namespaces)]
        for scope in scopes:  # each window keeps those of its own scope
            warm_state.keep_stored_kills(
                {
                    k
                    for k in warm_state.stored_kills(scope)
                    if k[3] <= NOW - timedelta(hours=2)
                },
                scope=scope,
            )
        assert sum(len(warm_state.stored_kills(scope)) for scope in scopes) > 0
        if cold:
            warm_state.forget_all()
        OomKill.objects.filter(
            container__workload__cluster=cluster,
            occurred_at__gt=NOW - timedelta(hours=1),
        ).delete()
        lookups: list[str] = []

        def count(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
            if 'FROM "recommender_oomkill"' in sql and '"container_id" IN' in sql:
                lookups.append(sql)
            return execute(sql, params, many, context)

        with connection.execute_wrapper(count):
            run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=2))
        assert run.status == RefreshRun.Status.SUCCEEDED, run.error
        assert run.counts["steady_windows"] > 1
        kills = sorted(
            OomKill.objects.filter(container__workload__cluster=cluster).values_list(
                "container__workload__namespace",
                "container__workload__name",
                "container__name",
                "pod",
                "occurred_at",
                "is_eviction",
            )
        )
        counts = {k: v for k, v in run.counts.items() if k.startswith("oom_kills")}
        return counts, len(lookups), kills

    shared_counts, shared_lookups, shared_kills = cycle_of("kills-shared")
    # A worker that knows no kill stored (a restarted one) looks up days of them:
    # each window its own, so what it holds stays one window's.
    cold_counts, cold_lookups, cold_kills = cycle_of("kills-cold", cold=True)
    assert cold_lookups > 1
    assert (cold_counts, cold_kills) == (shared_counts, shared_kills)
    # Each window reading its own, as before.
    monkeypatch.setattr(
        ooms.SharedKillLookup,
        "stored",
        lambda self, window, ids, *, since: ooms.read_stored_kills(ids, since=since),
    )
    alone_counts, alone_lookups, alone_kills = cycle_of("kills-alone")
    assert shared_lookups == 1 < alone_lookups
    assert shared_counts == alone_counts
    assert shared_counts["oom_kills_new"] > 0
    assert shared_kills == alone_kills


@pytest.mark.django_db
def test_the_steady_windows_of_a_cycle_are_stored_in_one_statement_of_each_kind(
    settings,
):
    """The windows by namespace of a steady cycle are stored together: the changed
    recommendations of every window in one insert and one pointer compare-and-swap,
    their workloads in one journal insert, however many windows moved."""
    cluster = fleet_in_windows(settings, "one-store")
    # Every container's recommendation moves this minute: none is stored as latest.
    Container.objects.filter(workload__cluster=cluster).update(
        latest_recommendation=None
    )
    later = NOW + timedelta(minutes=1)
    with CaptureQueriesContext(connection) as queries:
        run = refresh_cluster(cluster_id=cluster.pk, now=later)
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    moved_in = set(
        Recommendation.objects.filter(
            created_at=later, container__workload__cluster=cluster
        ).values_list("container__workload__namespace", flat=True)
    )
    # Several windows, and recommendations moved in more than one of them.
    assert run.counts["steady_windows"] > 1 and len(moved_in) > 1, moved_in
    sql = [q["sql"] for q in queries.captured_queries]
    inserts = [s for s in sql if 'INSERT INTO "recommender_recommendation"' in s]
    pointers = [
        s
        for s in sql
        if 'UPDATE "recommender_container"' in s and "latest_recommendation" in s
    ]
    journal = [
        s for s in sql if s.startswith('INSERT INTO "recommender_admissionchange"')
    ]
    assert (len(inserts), len(pointers), len(journal)) == (1, 1, 1)
    # On PostgreSQL the insert and the pointers' compare-and-swap are one statement.
    assert (inserts == pointers) == (connection.vendor == "postgresql")


def discovered_a_minute_later(
    settings: Any, name: str, plant: Any
) -> tuple[Cluster, Any, list[str], Any]:
    """A simulated fleet of 12 workloads after its first contact, discovered again a
    minute later once ``plant`` (given the cluster) added stored rows: the cluster,
    discovery's result, the statements it issued and what ``plant`` returned."""
    settings.SIMULATION_WORKLOADS = 12
    settings.SIMULATION_HISTORY_DAYS = 0.25
    cluster = Cluster.objects.create(name=name, kind="simulated")
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    planted = plant(cluster)
    later = NOW + timedelta(minutes=1)
    snapshot = cluster_adapter_for(cluster, now=later).discover()
    with CaptureQueriesContext(connection) as queries:
        found = discovery.upsert_discovery(
            cluster=cluster, snapshot=snapshot, now=later
        )
    return cluster, found, [q["sql"] for q in queries.captured_queries], planted


def test_a_discovery_that_writes_no_workload_reads_them_once(settings, db):
    """When discovery writes no workload, the pods' owners by name come from its own
    read of the stored workloads, as a read of their own would give them (active
    ones first: a gone workload of another kind and the same name comes after)."""

    def plant_a_gone_namesake(cluster: Cluster) -> tuple[Workload, Workload]:
        live = Workload.objects.filter(cluster=cluster).order_by("pk").first()
        gone = Workload.objects.create(
            cluster=cluster,
            kind="Job" if live.kind != "Job" else "CronJob",
            namespace=live.namespace,
            name=live.name,
            first_seen_at=NOW,
            last_seen_at=NOW + timedelta(minutes=1),
            is_active=False,
        )
        return live, gone

    cluster, found, sql, (live, gone) = discovered_a_minute_later(
        settings, "workloads-once", plant_a_gone_namesake
    )

    assert found.counts["workloads_new"] == found.counts["workloads_vanished"] == 0
    workload_reads = [
        statement
        for statement in sql
        # A streamed read is a cursor's DECLARE on PostgreSQL.
        if "SELECT" in statement
        and 'FROM "recommender_workload"' in statement
        and '"recommender_workload"."name"' in statement
        and "GROUP BY" not in statement  # the batch workloads' runs: their own read
    ]
    assert len(workload_reads) == 1, workload_reads
    read_again = load_pod_owners(
        cluster_id=cluster.pk, namespace=None, now=NOW + timedelta(minutes=1)
    )
    assert found.pods.by_name == read_again.by_name
    assert found.pods.by_name[(live.namespace, live.name)] == [
        (live.kind, live.pk),
        (gone.kind, gone.pk),
    ]


def test_discovery_reads_the_stored_pods_once(settings, db):
    """The stored pods' rows, compared with the live pods, and the owners of the
    pods no longer live (``PodOwners.stored``) come from one read of the pods: a
    gone pod within retention keeps its workload, one past it has none."""
    later = NOW + timedelta(minutes=1)

    def plant_gone_pods(cluster: Cluster) -> WorkloadPod:
        some = WorkloadPod.objects.filter(cluster=cluster).order_by("pk").first()
        for name, seen_at in (
            ("gone-recently", later - timedelta(days=1)),
            ("gone-long-ago", later - POD_RETENTION - timedelta(minutes=1)),
        ):
            WorkloadPod.objects.create(
                cluster=cluster,
                workload_id=some.workload_id,
                namespace=some.namespace,
                name=name,
                containers={},
                first_seen_at=seen_at,
                last_seen_at=seen_at,
            )
        return some

    _, found, sql, some = discovered_a_minute_later(
        settings, "pods-once", plant_gone_pods
    )

    pod_reads = [
        statement
        for statement in sql
        if "SELECT" in statement and '"recommender_workloadpod"."name"' in statement
    ]
    assert len(pod_reads) == 1, pod_reads
    assert found.owner_of(some.namespace, "gone-recently") == some.workload_id
    assert found.owner_of(some.namespace, "gone-long-ago") is None
    assert found.owner_of(some.namespace, some.name) == some.workload_id
