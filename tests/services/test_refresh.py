"""The refresh cycle end to end on the database, with the simulated cluster."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from recommender.cluster.simulated import OOM_LOOKBACK_S, build_fleet
from recommender.engine import AggregateSet, get_profile
from recommender.errors import SourceUnavailable
from recommender.models import (
    AdmissionChange,
    Checkpoint,
    Cluster,
    Container,
    OomKill,
    Policy,
    Recommendation,
    RefreshRun,
    Workload,
)
from recommender.services.connections import cluster_adapter_for
from recommender.services.refresh import cycle
from recommender.services.refresh.cycle import refresh_cluster
from recommender.services.refresh.discovery import Discovery, upsert_discovery
from recommender.services.refresh.expiry import expire_idle_aggregates
from recommender.sources.simulated import SimulatedUsageSource

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
WORKLOADS = 24


@pytest.fixture(autouse=True)
def small_fleet(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = WORKLOADS
    settings.SIMULATION_HISTORY_DAYS = 1.0


@pytest.fixture
def cluster(db):
    return Cluster.objects.create(name="sim-a", kind=Cluster.Kind.SIMULATED)


def snapshot_of_state(cluster):
    """Every stored fact of a cluster, comparable across runs."""
    containers = Container.objects.filter(workload__cluster=cluster)
    return {
        "workloads": sorted(
            Workload.objects.filter(cluster=cluster).values_list(
                "namespace", "kind", "name", "is_active", "replicas", "last_seen_at"
            )
        ),
        "containers": sorted(
            containers.values_list(
                "workload__name",
                "name",
                "kind",
                "request_cpu_millicores",
                "request_memory_bytes",
                "latest_recommendation_id",
            )
        ),
        "checkpoints": sorted(
            (
                c.container.workload.name,
                c.container.name,
                bytes(c.state),
                c.version,
                c.last_sample_at,
                c.sample_count,
            )
            for c in Checkpoint.objects.filter(container__in=containers).select_related(
                "container__workload"
            )
        ),
        "recommendations": Recommendation.objects.filter(
            container__in=containers
        ).count(),
        "oom_kills": OomKill.objects.filter(container__in=containers).count(),
    }


def test_first_refresh_discovers_the_fleet_and_recommends_every_container(cluster):
    run = refresh_cluster(cluster_id=cluster.pk, now=NOW)

    assert run.status == RefreshRun.Status.SUCCEEDED
    assert run.counts["workloads"] == WORKLOADS
    assert run.counts["samples"] > 0
    # Every step of a cycle is timed as a phase (the bench prints each).
    assert set(run.timings) == {
        "discover_s",
        "upsert_s",
        "pricing_s",
        "ingest_s",
        "recommend_s",
        "store_s",
        "node_pools_s",
        "totals_s",
        "savings_snapshot_s",
        "total_s",
    }
    assert Workload.objects.filter(cluster=cluster, is_active=True).count() == WORKLOADS
    assert set(Policy.objects.values_list("mode", "profile")) == {
        (Policy.Mode.OFF, "vpa")
    }
    regular = Container.objects.filter(workload__cluster=cluster).exclude(kind="init")
    assert run.counts["containers"] == regular.count()
    assert not regular.filter(latest_recommendation__isnull=True).exists()
    init = Container.objects.filter(workload__cluster=cluster, kind="init")
    assert init.exists()
    assert not init.filter(latest_recommendation__isnull=False).exists()
    assert not Recommendation.objects.filter(container__kind="init").exists()
    # Far-too-high requests come down: most CPU targets are below the request.
    pairs = [
        (c.request_cpu_millicores, c.latest_recommendation.target_cpu_millicores)
        for c in regular.select_related("latest_recommendation")
        if c.request_cpu_millicores
    ]
    assert sum(target < request for request, target in pairs) > len(pairs) / 2
    # Every OOM kill the cluster reported for a known container is stored once.
    fleet = build_fleet(7, WORKLOADS)
    kills = fleet.oom_kills_between(NOW.timestamp() - OOM_LOOKBACK_S, NOW.timestamp())
    assert kills
    assert OomKill.objects.filter(container__workload__cluster=cluster).count() == len(
        kills
    )
    assert run.counts["oom_kills_accepted"] > 0


def test_refreshing_twice_at_the_same_time_changes_nothing(cluster):
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    before = snapshot_of_state(cluster)

    again = refresh_cluster(cluster_id=cluster.pk, now=NOW)

    assert again.status == RefreshRun.Status.SUCCEEDED
    assert again.counts["samples"] == 0
    assert again.counts["recommendations_changed"] == 0
    assert snapshot_of_state(cluster) == before


def test_a_restart_resumes_from_checkpoints_as_if_never_interrupted(settings, db):
    steady = Cluster.objects.create(name="steady", kind=Cluster.Kind.SIMULATED)
    restarted = Cluster.objects.create(name="restarted", kind=Cluster.Kind.SIMULATED)
    later = NOW + timedelta(minutes=90)
    for minutes in (0, 30, 60, 90):
        refresh_cluster(cluster_id=steady.pk, now=NOW + timedelta(minutes=minutes))
    refresh_cluster(cluster_id=restarted.pk, now=NOW)
    # The process dies: nothing in memory survives, not even the fleet.
    build_fleet.cache_clear()
    refresh_cluster(cluster_id=restarted.pk, now=later)

    def state(cluster):
        return sorted(
            (
                c.container.workload.name,
                c.container.name,
                bytes(c.state),
                c.sample_count,
                c.last_sample_at,
            )
            for c in Checkpoint.objects.filter(
                container__workload__cluster=cluster
            ).select_related("container__workload")
        )

    assert state(steady) == state(restarted)
    assert all(row[3] > 0 for row in state(restarted) if "cleanup" not in row[0])


def test_a_lost_compare_and_swap_skips_the_samples_the_winner_applied(
    cluster, monkeypatch
):
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    later = NOW + timedelta(minutes=10)
    store = cycle._store
    slow_counts = {}

    def winner_stores_first(windows, *schedule):
        # Worker A has read checkpoints and computed; worker B runs a whole cycle
        # before A stores.
        monkeypatch.setattr(cycle, "_store", store)
        refresh_cluster(cluster_id=cluster.pk, now=later)
        slow_counts["after_winner"] = snapshot_of_state(cluster)
        stored = store(windows, *schedule)
        (window,) = windows
        slow_counts.update({**window.counts, **stored})
        return stored

    monkeypatch.setattr(cycle, "_store", winner_stores_first)
    refresh_cluster(cluster_id=cluster.pk, now=later)

    assert slow_counts["checkpoint_conflicts"] == slow_counts["containers"]
    assert slow_counts["checkpoints_written"] == 0
    after = snapshot_of_state(cluster)
    assert after["checkpoints"] == slow_counts["after_winner"]["checkpoints"]
    assert after["oom_kills"] == slow_counts["after_winner"]["oom_kills"]


class FailingSource(SimulatedUsageSource):
    """The simulated source, whose network drops after ``working_calls`` answers."""

    def __init__(self, *, working_calls: int, **kwargs):
        super().__init__(**kwargs)
        self.calls = 0
        self.working_calls = working_calls

    def fetch_usage(self, **kwargs):
        self.calls += 1
        if self.calls > self.working_calls:
            raise SourceUnavailable("connection refused by the metrics backend")
        return super().fetch_usage(**kwargs)


def test_a_failing_source_fails_the_run_and_keeps_what_was_stored(cluster, monkeypatch):
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    before = snapshot_of_state(cluster)
    fleet = build_fleet(7, WORKLOADS)
    monkeypatch.setattr(
        cycle,
        "usage_source_for",
        lambda c: FailingSource(working_calls=0, fleet=fleet),
    )

    with pytest.raises(SourceUnavailable):
        refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(hours=2))

    failed = RefreshRun.objects.filter(cluster=cluster).first()
    assert failed.status == RefreshRun.Status.FAILED
    assert "connection refused by the metrics backend" in failed.error
    assert "ingest failed" in failed.error
    after = snapshot_of_state(cluster)
    # Discovery's bookkeeping moved on; recommendations and engine state did not.
    assert after["checkpoints"] == before["checkpoints"]
    assert after["recommendations"] == before["recommendations"]
    assert [c[:5] for c in after["containers"]] == [c[:5] for c in before["containers"]]
    assert [c[5] for c in after["containers"]] == [c[5] for c in before["containers"]]


def test_vanished_workloads_become_inactive_and_keep_their_history(cluster, settings):
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    recommendations = Recommendation.objects.count()
    settings.SIMULATION_WORKLOADS = WORKLOADS - 8  # another fleet: most names are gone

    run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))

    gone = Workload.objects.filter(cluster=cluster, is_active=False)
    assert run.counts["workloads_vanished"] == gone.count() > 0
    assert Recommendation.objects.filter(container__workload__in=gone).exists()
    assert Recommendation.objects.count() >= recommendations


def test_what_one_read_of_the_stored_rows_tells_discovery_still_holds(cluster):
    """Discovery reads each stored workload once (its checkpoint-less containers,
    its stale last-seen time and its policy from the same reads as the rest): a
    container whose checkpoint row is gone gets an empty one again, a workload
    whose policy row is gone gets one in Off mode, and last-seen times due a
    rewrite are rewritten and journaled, with nothing else written."""
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    container = Container.objects.filter(
        workload__cluster=cluster, checkpoint__isnull=False
    ).first()
    Checkpoint.objects.filter(container=container).delete()
    workload = Workload.objects.filter(cluster=cluster).first()
    Policy.objects.filter(workload=workload).delete()
    later = NOW + timedelta(minutes=11)  # past LAST_SEEN_RESOLUTION
    journal_end = AdmissionChange.objects.order_by("-pk").values_list("pk", flat=True)[
        0
    ]

    run = refresh_cluster(cluster_id=cluster.pk, now=later)

    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    # Recreated empty, then filled by the container's first contact in this cycle.
    checkpoint = Checkpoint.objects.get(container=container)
    assert checkpoint.last_sample_at is not None and bytes(checkpoint.state)
    assert Policy.objects.get(workload=workload).mode == Policy.Mode.OFF
    active = Workload.objects.filter(cluster=cluster, is_active=True)
    assert set(active.values_list("last_seen_at", flat=True)) == {later}
    journaled = set(
        AdmissionChange.objects.filter(cluster=cluster, pk__gt=journal_end).values_list(
            "workload_id", flat=True
        )
    )
    assert set(active.values_list("pk", flat=True)) <= journaled


def test_idle_aggregates_expire_after_eight_days_and_not_before(cluster):
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    stored = Checkpoint.objects.filter(container__workload__cluster=cluster).count()

    soon = expire_idle_aggregates(now=NOW + timedelta(hours=1))
    # The same run thins the savings trend: nothing is old enough here.
    no_snapshots = {"snapshots_dropped": 0, "snapshots_thinned": 0}
    assert soon.counts == {
        "checked": stored,
        "expired": 0,
        "failed": 0,
        **no_snapshots,
    }

    late = expire_idle_aggregates(now=NOW + timedelta(days=8, minutes=1))
    assert late.counts == {
        "checked": stored,
        "expired": stored,
        "failed": 0,
        **no_snapshots,
    }
    # Reset, not deleted: a refresh racing expiry still finds every row.
    assert not Checkpoint.objects.filter(
        container__workload__cluster=cluster, sample_count__gt=0
    ).exists()
    assert Recommendation.objects.filter(container__workload__cluster=cluster).exists()


def test_naive_now_is_rejected_naming_the_field(cluster):
    from recommender.errors import InvalidInput

    with pytest.raises(InvalidInput) as caught:
        refresh_cluster(cluster_id=cluster.pk, now=datetime(2026, 1, 1))
    assert caught.value.field == "now"


def checkpoint_state(cluster):
    """Engine state and bookkeeping by (workload, container), comparable across
    clusters."""
    return sorted(
        (
            c.container.workload.name,
            c.container.name,
            bytes(c.state),
            c.sample_count,
            c.last_sample_at,
        )
        for c in Checkpoint.objects.filter(
            container__workload__cluster=cluster
        ).select_related("container__workload")
    )


def recommendation_values(cluster):
    return sorted(
        (c.workload.name, c.name, c.latest_recommendation.values_tuple())
        for c in Container.objects.filter(
            workload__cluster=cluster, latest_recommendation__isnull=False
        ).select_related("workload", "latest_recommendation")
    )


def test_namespace_shards_add_up_to_a_whole_cluster_refresh(db):
    whole = Cluster.objects.create(name="whole", kind=Cluster.Kind.SIMULATED)
    sharded = Cluster.objects.create(name="sharded", kind=Cluster.Kind.SIMULATED)
    for cluster in (whole, sharded):
        refresh_cluster(cluster_id=cluster.pk, now=NOW)
    later = NOW + timedelta(minutes=30)
    refresh_cluster(cluster_id=whole.pk, now=later)
    namespaces = sorted(
        set(
            Workload.objects.filter(cluster=sharded).values_list("namespace", flat=True)
        )
    )
    assert len(namespaces) > 1

    runs = [
        refresh_cluster(cluster_id=sharded.pk, now=later, namespace=namespace)
        for namespace in namespaces
    ]

    assert [r.shard for r in runs] == namespaces
    assert (
        sum(r.counts["containers"] for r in runs)
        == Checkpoint.objects.filter(container__workload__cluster=sharded).count()
    )
    assert checkpoint_state(sharded) == checkpoint_state(whole)
    assert recommendation_values(sharded) == recommendation_values(whole)
    # A shard writes only its own namespace.
    before = checkpoint_state(sharded)
    refresh_cluster(
        cluster_id=sharded.pk,
        now=later + timedelta(minutes=10),
        namespace=namespaces[0],
    )
    moved = {
        (name, container)
        for (name, container, *rest), old in zip(
            checkpoint_state(sharded), before, strict=True
        )
        if rest != list(old[2:])
    }
    in_first = set(
        Container.objects.filter(
            workload__cluster=sharded, workload__namespace=namespaces[0]
        ).values_list("workload__name", "name")
    )
    assert moved and moved <= in_first


def test_a_worker_killed_between_engine_and_store_loses_and_double_counts_nothing(
    db, monkeypatch
):
    steady = Cluster.objects.create(name="steady", kind=Cluster.Kind.SIMULATED)
    crashed = Cluster.objects.create(name="crashed", kind=Cluster.Kind.SIMULATED)
    for cluster in (steady, crashed):
        refresh_cluster(cluster_id=cluster.pk, now=NOW)
    later = NOW + timedelta(hours=3)  # long enough for new OOM kills in the fleet
    namespace = Workload.objects.filter(cluster=crashed).values_list(
        "namespace", flat=True
    )[0]
    refresh_cluster(cluster_id=steady.pk, now=later, namespace=namespace)
    before = snapshot_of_state(crashed)
    store_recommendation = cycle._store_recommendations

    def killed(*args):
        # Checkpoints and OOM rows of this transaction are written by now.
        raise RuntimeError("worker killed")

    monkeypatch.setattr(cycle, "_store_recommendations", killed)
    with pytest.raises(RuntimeError, match="worker killed"):
        refresh_cluster(cluster_id=crashed.pk, now=later, namespace=namespace)
    after_crash = snapshot_of_state(crashed)
    assert after_crash["checkpoints"] == before["checkpoints"]
    assert after_crash["oom_kills"] == before["oom_kills"]
    assert after_crash["recommendations"] == before["recommendations"]

    monkeypatch.setattr(cycle, "_store_recommendations", store_recommendation)
    rerun = refresh_cluster(cluster_id=crashed.pk, now=later, namespace=namespace)

    assert rerun.counts["samples"] > 0
    assert checkpoint_state(crashed) == checkpoint_state(steady)
    assert recommendation_values(crashed) == recommendation_values(steady)
    assert (
        OomKill.objects.filter(container__workload__cluster=crashed).count()
        == OomKill.objects.filter(container__workload__cluster=steady).count()
    )


class ClosingSource(SimulatedUsageSource):
    """The simulated source, remembering whether it was closed."""

    closed = 0

    def close(self):
        ClosingSource.closed += 1


def test_a_cycle_closes_its_source_whether_it_succeeds_or_fails(cluster, monkeypatch):
    fleet = build_fleet(7, WORKLOADS)
    ClosingSource.closed = 0
    monkeypatch.setattr(cycle, "usage_source_for", lambda c: ClosingSource(fleet=fleet))
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    assert ClosingSource.closed == 1

    def broken(self, **kwargs):
        raise SourceUnavailable("metrics backend down")

    monkeypatch.setattr(ClosingSource, "fetch_usage", broken)
    with pytest.raises(SourceUnavailable):
        refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(hours=1))
    assert ClosingSource.closed == 2


def test_an_oom_kill_finds_its_workload_by_the_adapters_answer_before_its_name():
    found = Discovery(cluster=None, now=NOW, namespace=None)
    found.workload_by_key[("shop", "StatefulSet", "db")] = 1
    found.pods.by_name[("shop", "db")] = [("StatefulSet", 1)]
    found.pods.by_name[("shop", "db-migrate")] = [("StatefulSet", 2)]

    # The pod's name looks like another workload's; the adapter knows better.
    assert found.owner_of("shop", "db-migrate-0", kind="StatefulSet", name="db") == 1
    # A pod discovery never saw: its controller's naming rule, longest name first.
    assert found.owner_of("shop", "db-migrate-0") == 2
    assert found.owner_of("shop", "unknown-0") is None
    # A stored owner (from owner references) beats any name.
    found.pods.stored[("shop", "db-migrate-1")] = 1
    assert found.owner_of("shop", "db-migrate-1") == 1


def cron_series(cluster):
    """Engine series (pod names) in each CronJob container's checkpoint."""
    out = {}
    for checkpoint in Checkpoint.objects.filter(
        container__workload__cluster=cluster, container__workload__kind="CronJob"
    ).select_related("container__workload"):
        if checkpoint.state:
            workload = checkpoint.container.workload
            aggs = AggregateSet.from_checkpoints(
                get_profile("vpa"), [bytes(checkpoint.state)]
            )
            key = (workload.namespace, workload.name, checkpoint.container.name)
            out[key] = set(aggs.series_keys(0))
    return out


def test_a_cronjobs_finished_pods_do_not_pile_up_in_its_checkpoint(cluster):
    fleet = build_fleet(7, WORKLOADS)
    crons = {(w.namespace, w.name): w for w in fleet.workloads if w.kind == "CronJob"}
    ran = runs_seen = 0
    for hours in (0, 5, 13):
        now = NOW + timedelta(hours=hours)
        run = refresh_cluster(cluster_id=cluster.pk, now=now)
        series = cron_series(cluster)
        assert series
        for (namespace, name, _container), pods in series.items():
            live = {
                pod for pod, _ in fleet.pods_at(crons[namespace, name], now.timestamp())
            }
            # Only pods alive now keep a series; the finished runs' samples stay.
            assert pods <= live
        ran += sum(
            len(w.runs_between(now.timestamp() - 86400.0, now.timestamp()))
            for w in crons.values()
        )
        runs_seen += run.counts["series_dropped"]
    # Runs did come and go while the checkpoints kept their history.
    assert ran > len(crons) and runs_seen > 0
    assert all(
        c.sample_count > 0
        for c in Checkpoint.objects.filter(
            container__workload__cluster=cluster, container__workload__kind="CronJob"
        )
    )


def test_a_shard_reads_writes_and_creates_only_its_namespace(cluster):
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    discovered_at = Cluster.objects.get(pk=cluster.pk).last_discovered_at
    namespaces = sorted(
        set(
            Workload.objects.filter(cluster=cluster).values_list("namespace", flat=True)
        )
    )
    mine, other = namespaces[0], namespaces[1]
    gone = Workload.objects.filter(cluster=cluster, namespace=mine).first()
    Workload.objects.filter(pk=gone.pk).update(is_active=False)
    Workload.objects.filter(cluster=cluster, namespace=other).delete()
    later = NOW + timedelta(minutes=1)

    snapshot = cluster_adapter_for(cluster, now=later, namespace=mine).discover()
    with CaptureQueriesContext(connection) as queries:
        upsert_discovery(cluster=cluster, snapshot=snapshot, now=later, namespace=mine)
    run = refresh_cluster(cluster_id=cluster.pk, now=later, namespace=mine)

    assert {w.namespace for w in snapshot.workloads} == {mine}
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    # The shard brings its own vanished-and-back workload back ...
    assert Workload.objects.get(pk=gone.pk).is_active
    # ... and neither creates nor loads workloads of other namespaces.
    assert not Workload.objects.filter(cluster=cluster, namespace=other).exists()
    # Every read of the cluster's workloads is narrowed to the namespace.
    workload_reads = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith("SELECT")
        and '"recommender_workload"."cluster_id" =' in q["sql"]
    ]
    assert workload_reads
    assert all('"namespace" =' in sql for sql in workload_reads), workload_reads
    assert Cluster.objects.get(pk=cluster.pk).last_discovered_at == discovered_at
