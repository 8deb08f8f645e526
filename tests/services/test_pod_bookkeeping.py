"""Discovery's pod bookkeeping every cycle (services/refresh/pods.py): the statements
of the batch workloads' running hours, the retention delete only when a row is past
retention, and the live pods' containers turned into stored resources once per tuple
of them, unhashed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from recommender.cluster.base import ContainerSpec, PodInfo
from recommender.engine.resources import Resources
from recommender.models import (
    Checkpoint,
    Cluster,
    Container,
    UsageHour,
    Workload,
    WorkloadPod,
)
from recommender.services.readmodels.pod_owners import POD_RETENTION
from recommender.services.refresh import pods
from recommender.services.refresh.cycle import refresh_cluster
from recommender.services.refresh.pods import (
    BATCH_KINDS,
    record_pods,
    record_running_hours,
    stored_history,
)

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.fixture
def young_batch_fleet(settings, db) -> Cluster:
    """A simulated fleet with Jobs and CronJobs, first seen a few minutes ago, with a
    few hours of stored usage history: their running hours come from it."""
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 24
    settings.SIMULATION_HISTORY_DAYS = 0.25
    cluster = Cluster.objects.create(name="batch", kind="simulated")
    for minute in (0, 1):
        run = refresh_cluster(
            cluster_id=cluster.pk, now=NOW + timedelta(minutes=minute)
        )
        assert run.status == "succeeded", run.error
    # The simulation has CronJobs; a Job beside them, one run seen.
    cronjob = Workload.objects.filter(cluster=cluster, kind="CronJob").first()
    job = Workload.objects.create(
        cluster=cluster,
        kind="Job",
        namespace=cronjob.namespace,
        name="migrate",
        first_seen_at=NOW,
    )
    WorkloadPod.objects.create(
        cluster=cluster,
        workload=job,
        namespace=job.namespace,
        name="migrate-x7k2p",
        started_at=NOW - timedelta(minutes=30),
        ran_until=NOW + timedelta(minutes=1),
    )
    return cluster


def _tables(queries: CaptureQueriesContext) -> list[str]:
    """Each statement's verb and first table."""
    out = []
    for query in queries.captured_queries:
        sql = query["sql"]
        verb = sql.split()[0]
        table = sql.split('"recommender_', 1)[1].split('"', 1)[0] if '"' in sql else ""
        out.append(f"{verb} {table}")
    return out


def test_a_young_batch_fleets_running_hours_take_four_statements(young_batch_fleet):
    """The workloads with their pods' runs (one grouped statement), the stored
    history of their namespaces (one), the sampled hours of the workloads it can
    count for (one) and the update of those that changed (one)."""
    cluster = young_batch_fleet
    Workload.objects.filter(cluster=cluster).update(running_hours_month=None)

    with CaptureQueriesContext(connection) as queries:
        changed = record_running_hours(
            cluster_id=cluster.pk, namespace=None, now=NOW + timedelta(minutes=2)
        )

    batch = Workload.objects.filter(cluster=cluster, kind__in=BATCH_KINDS)
    assert changed == batch.count()
    assert len(queries.captured_queries) == 4, _tables(queries)
    # The history counted: some hours are not those discovery watched run.
    assert UsageHour.objects.filter(container__workload__in=batch).exists()


def test_batch_workloads_watched_past_retention_read_no_history(young_batch_fleet):
    """A workload discovery has watched for the whole retention window is counted
    from its pods' runs alone: neither the stored history nor the sampled hours are
    read, and nothing is written when no figure moved."""
    cluster = young_batch_fleet
    later = NOW + timedelta(minutes=2)
    Workload.objects.filter(cluster=cluster).update(
        first_seen_at=later - POD_RETENTION - timedelta(hours=1)
    )
    record_running_hours(cluster_id=cluster.pk, namespace=None, now=later)

    with CaptureQueriesContext(connection) as queries:
        changed = record_running_hours(cluster_id=cluster.pk, namespace=None, now=later)

    assert changed == 0
    assert _tables(queries) == ["SELECT workload"]


def test_stored_history_is_one_statement_per_namespace_figures(db):
    """Per namespace: how far its stored hours reach before its first workload's
    first sight, and its latest sample; a namespace without stored hours after
    ``since``, or without a sample, has none. One statement."""
    cluster = Cluster.objects.create(name="history", kind="simulated")
    since = NOW - POD_RETENTION
    last_sample = NOW - timedelta(minutes=3)

    def container(namespace: str, name: str, first_seen: datetime) -> Container:
        workload = Workload.objects.create(
            cluster=cluster,
            kind="Job",
            namespace=namespace,
            name=name,
            first_seen_at=first_seen,
        )
        return Container.objects.create(workload=workload, name="main")

    early = container("ops", "early", NOW - timedelta(hours=2))
    late = container("ops", "late", NOW - timedelta(minutes=30))
    quiet = container("quiet", "job", NOW - timedelta(hours=1))
    unsampled = container("unsampled", "job", NOW - timedelta(hours=1))
    stale = container("stale", "job", NOW - timedelta(hours=1))
    for c, hours_ago in ((early, 5), (late, 1), (quiet, 3), (unsampled, 4)):
        UsageHour.objects.create(
            container=c, ends_at=NOW - timedelta(hours=hours_ago), cpu_samples=60
        )
    for c in (early, late, unsampled, stale):
        Checkpoint.objects.create(
            container=c, histogram_key="k", state=b"", last_sample_at=last_sample
        )
    # Hours up to ``since`` do not count.
    for c in (early, stale):
        UsageHour.objects.create(container=c, ends_at=since, cpu_samples=60)
    Checkpoint.objects.create(
        container=quiet, histogram_key="k", state=b"", last_sample_at=None
    )

    with CaptureQueriesContext(connection) as queries:
        history = stored_history(
            cluster_id=cluster.pk,
            namespaces=["ops", "quiet", "unsampled", "stale", "absent"],
            since=since,
        )

    assert len(queries.captured_queries) == 1
    # The hours are read by a probe per container (its earliest hour after
    # ``since``, by the usage_hour_once index), not all scanned and grouped.
    sql = queries.captured_queries[0]["sql"]
    assert 'FROM "recommender_usagehour" U0' in sql and "LIMIT 1" in sql, sql
    # ops: hours from 6 h ago (the hour ending 5 h ago), first sight 2 h ago.
    assert history == {
        "ops": pods.StoredHistory(before_first_sight_s=4 * 3600.0, until=last_sample),
        "unsampled": pods.StoredHistory(
            before_first_sight_s=4 * 3600.0, until=last_sample
        ),
    }


def _pod(name: str, containers: tuple[ContainerSpec, ...]) -> PodInfo:
    return PodInfo(namespace="ops", name=name, phase="Running", containers=containers)


@pytest.fixture
def deployment(db) -> Workload:
    cluster = Cluster.objects.create(name="pods", kind="simulated")
    return Workload.objects.create(
        cluster=cluster, kind="Deployment", namespace="ops", name="web"
    )


def _record(workload: Workload, live: list[PodInfo], now: datetime) -> dict[str, int]:
    return record_pods(
        cluster_id=workload.cluster_id,
        namespace=None,
        now=now,
        pods=[(pod, workload.pk) for pod in live],
    )


def test_the_retention_delete_runs_only_when_a_stored_pod_is_past_retention(
    deployment,
):
    """A cycle whose read of the stored pods found none past ``POD_RETENTION``
    deletes nothing and says so; one that found one deletes it, and only it."""
    specs = (ContainerSpec("app", requests=Resources(100, 2**20)),)
    live = [_pod("web-1", specs)]
    _record(deployment, live, NOW)
    # Past retention from NOW + 2 minutes on.
    for name, seen_at in (
        ("web-recent", NOW - timedelta(days=1)),
        ("web-expired", NOW + timedelta(minutes=2) - POD_RETENTION),
    ):
        WorkloadPod.objects.create(
            cluster_id=deployment.cluster_id,
            workload=deployment,
            namespace="ops",
            name=name,
            first_seen_at=seen_at,
            last_seen_at=seen_at,
        )

    with CaptureQueriesContext(connection) as queries:
        counts = _record(deployment, live, NOW + timedelta(minutes=1))
    assert counts["pods_forgotten"] == 0
    assert not [q for q in queries.captured_queries if q["sql"].startswith("DELETE")]

    counts = _record(deployment, live, NOW + timedelta(minutes=3))
    assert counts["pods_forgotten"] == 1
    assert sorted(WorkloadPod.objects.values_list("name", flat=True)) == [
        "web-1",
        "web-recent",
    ]


HASHED: list[int] = []


@dataclass(frozen=True)
class CountedSpec(ContainerSpec):
    """A ContainerSpec that notes each time it is hashed."""

    def __hash__(self) -> int:
        HASHED.append(1)
        return super().__hash__()


def test_the_live_pods_containers_are_read_without_hashing_them(deployment):
    """Each tuple of containers is turned into its stored resources once, found by
    its identity: pods that carry one tuple (an adapter's replicas of a workload)
    share it, and no tuple of frozen dataclasses is hashed, neither when the pods
    are stored nor when a later pass finds them unchanged (and writes nothing)."""
    shared = (CountedSpec("app", requests=Resources(100, 2**20)),)
    own = (CountedSpec("app", requests=Resources(100, 2**20)),)
    other = (CountedSpec("app", requests=Resources(200, 2**20)),)
    live = [_pod(f"web-{i}", shared) for i in range(50)]
    live += [_pod("web-own", own), _pod("web-other", other)]
    HASHED.clear()

    _record(deployment, live, NOW)
    with CaptureQueriesContext(connection) as queries:
        _record(deployment, live, NOW + timedelta(minutes=1))

    assert HASHED == []
    assert len(queries.captured_queries) == 1  # the read
    stored = dict(WorkloadPod.objects.values_list("name", "containers"))
    app = {"requests": {"cpu": 100, "memory": 2**20}, "limits": {}}
    assert stored == {
        **{f"web-{i}": {"app": app} for i in range(50)},
        "web-own": {"app": app},
        "web-other": {"app": {**app, "requests": {"cpu": 200, "memory": 2**20}}},
    }


def test_stored_pods_all_due_at_once_are_rewritten_in_one_statement(
    deployment, monkeypatch
):
    """Every stored pod falls due for its last-seen rewrite together an hour after
    a first contact: 160,000 rows at 100,000 containers were 320 statements of 500.
    They go REWRITE_BATCH rows a statement (as many as SQLite binds)."""
    monkeypatch.setattr(pods, "REWRITE_BATCH", 10)
    specs = (ContainerSpec("app", requests=Resources(100, 2**20)),)
    live = [_pod(f"web-{i}", specs) for i in range(25)]
    _record(deployment, live, NOW)
    later = NOW + pods.TOUCH_EVERY + timedelta(minutes=1)
    with CaptureQueriesContext(connection) as queries:
        _record(deployment, live, later)
    updates = [q for q in queries.captured_queries if q["sql"].startswith("WITH v")]
    assert len(updates) == 3  # 25 rows, 10 a statement
    seen = WorkloadPod.objects.filter(workload=deployment).values_list(
        "last_seen_at", flat=True
    )
    assert set(seen) == {later}
