"""First contact in chunks of containers: the same results as the whole fleet at once,
with the source read one chunk's workloads at a time; and by namespace shard, each
new namespace discovered, stored and first contacted by its own refresh."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from recommender.models import (
    Checkpoint,
    Cluster,
    Container,
    NamespaceLimitRange,
    NodePool,
    OomKill,
    Policy,
    Recommendation,
    RefreshRun,
    Workload,
    WorkloadPod,
)
from recommender.services.refresh import chunking
from recommender.services.refresh.backfill import backfill_cluster
from recommender.services.refresh.cycle import refresh_cluster
from recommender.sources.simulated import SimulatedUsageSource

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.fixture
def fleet(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 14
    # More than a day: the chunks read several day pieces each.
    settings.SIMULATION_HISTORY_DAYS = 1.2


@pytest.fixture
def widest_read(monkeypatch):
    """The most series one usage read returned, and the workloads each chunk asked."""
    seen = {"series": 0, "chunked_reads": []}
    whole = SimulatedUsageSource.fetch_usage
    chosen = SimulatedUsageSource.fetch_workload_usage

    def fetch_usage(self, **kwargs):
        grid = whole(self, **kwargs)
        seen["series"] = max(seen["series"], len(grid.series))
        return grid

    def fetch_workload_usage(self, **kwargs):
        grid = chosen(self, **kwargs)
        seen["series"] = max(seen["series"], len(grid.series))
        seen["chunked_reads"].append(frozenset(kwargs["workloads"]))
        return grid

    monkeypatch.setattr(SimulatedUsageSource, "fetch_usage", fetch_usage)
    monkeypatch.setattr(
        SimulatedUsageSource, "fetch_workload_usage", fetch_workload_usage
    )
    return seen


def stored(cluster: Cluster) -> dict[str, object]:
    """Everything a refresh stores of a cluster, keyed by names, not ids."""
    return {
        "checkpoints": sorted(
            (
                c.container.workload.namespace,
                c.container.workload.name,
                c.container.name,
                c.histogram_key,
                bytes(c.state),
                c.sample_count,
                c.last_sample_at,
            )
            for c in Checkpoint.objects.filter(
                container__workload__cluster=cluster
            ).select_related("container__workload")
        ),
        "recommendations": sorted(
            (
                r.container.workload.namespace,
                r.container.workload.name,
                r.container.name,
                r.created_at,
                r.values_tuple(),
                repr(sorted(r.explanation.items())),
            )
            for r in Recommendation.objects.filter(
                container__workload__cluster=cluster
            ).select_related("container__workload")
        ),
        "latest": sorted(
            (
                c.workload.namespace,
                c.workload.name,
                c.name,
                c.latest_recommendation.created_at,
                c.latest_recommendation.values_tuple(),
            )
            for c in Container.objects.filter(workload__cluster=cluster)
            .exclude(latest_recommendation=None)
            .select_related("workload", "latest_recommendation")
        ),
        "oom_kills": sorted(
            (k.container.workload.name, k.container.name, k.pod, k.occurred_at)
            for k in OomKill.objects.filter(container__workload__cluster=cluster)
        ),
    }


def refresh_twice(settings, name: str, chunk: int) -> tuple[Cluster, list[RefreshRun]]:
    settings.FIRST_CONTACT_CHUNK_CONTAINERS = chunk
    cluster = Cluster.objects.create(name=name, kind=Cluster.Kind.SIMULATED)
    runs = [
        refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=m))
        for m in (0, 1)
    ]
    for run in runs:
        assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    return cluster, runs


@pytest.mark.django_db
def test_a_chunked_first_contact_stores_what_the_whole_fleet_at_once_does(
    settings, fleet, widest_read
):
    whole, whole_runs = refresh_twice(settings, "whole", chunk=0)
    whole_widest = widest_read["series"]
    assert widest_read["chunked_reads"] == []

    widest_read["series"] = 0
    chunked, chunked_runs = refresh_twice(settings, "chunked", chunk=4)

    first = chunked_runs[0].counts
    assert first["first_contact_chunks"] > 2
    assert first["containers"] == whole_runs[0].counts["containers"] > 8
    # Each chunk read only its own workloads, every workload once per day piece.
    reads = widest_read["chunked_reads"]
    assert len(reads) == 2 * first["first_contact_chunks"]  # 1.2 days: two pieces
    assert len(set().union(*reads)) == len(
        {c.workload_id for c in Container.objects.filter(workload__cluster=whole)}
    )
    assert all(not (a & b) for a in reads[0::2] for b in reads[0::2] if a is not b)
    assert widest_read["series"] < whole_widest
    # The same samples, OOM kills, checkpoints and recommendations, byte for byte.
    for name in ("samples", "oom_kills_new", "checkpoints_written"):
        assert first[name] == whole_runs[0].counts[name], name
    assert (
        first["recommendations_changed"]
        == (whole_runs[0].counts["recommendations_changed"])
    )
    assert first["series_unmatched"] == whole_runs[0].counts["series_unmatched"]
    # The steady cycle after it is one window again (nothing left to contact).
    assert "first_contact_chunks" not in chunked_runs[1].counts
    assert chunked_runs[1].counts["samples"] == whole_runs[1].counts["samples"]
    assert stored(chunked) == stored(whole)


@pytest.mark.django_db
def test_a_chunked_back_fill_stores_what_the_whole_fleet_at_once_does(
    settings, fleet, widest_read
):
    results = {}
    for name, chunk in (("whole", 0), ("chunked", 3)):
        settings.FIRST_CONTACT_CHUNK_CONTAINERS = chunk
        cluster = Cluster.objects.create(name=name, kind=Cluster.Kind.SIMULATED)
        run = backfill_cluster(cluster_id=cluster.pk, now=NOW, days=2)
        assert run.status == RefreshRun.Status.SUCCEEDED, run.error
        results[name] = (cluster, run)
    assert len(widest_read["chunked_reads"]) > 2 * 2
    whole_run, chunked_run = results["whole"][1], results["chunked"][1]
    for name in ("samples", "checkpoints_written", "containers", "oom_kills_new"):
        assert chunked_run.counts[name] == whole_run.counts[name], name
    assert stored(results["chunked"][0]) == stored(results["whole"][0])


@pytest.mark.django_db
def test_a_large_clusters_steady_windows_by_namespace_store_what_one_window_does(
    settings,
):
    """Steady cycles in windows by namespace (a large namespace alone, the small ones
    together) store what one window does, and the process keeps every window's
    engine rows for the next cycle (none forgets another's)."""
    from recommender.services.refresh import warm_state

    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 40
    settings.SIMULATION_HISTORY_DAYS = 0.25
    settings.CHECKPOINT_INTERVAL_S = 0  # every checkpoint written: compared below
    settings.STEADY_WINDOW_CONTAINERS = 0

    def cycles(name: str) -> tuple[Cluster, list[RefreshRun]]:
        warm_state.forget_all()
        cluster = Cluster.objects.create(name=name, kind=Cluster.Kind.SIMULATED)
        runs = [
            refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=m))
            for m in range(4)
        ]
        assert {run.status for run in runs} == {RefreshRun.Status.SUCCEEDED}
        return cluster, runs

    one, one_runs = cycles("one-window")
    settings.STEADY_WINDOW_CONTAINERS = 24
    split, split_runs = cycles("by-namespace")

    containers = split_runs[-1].counts["containers"]
    sizes: dict[str, int] = {}
    for namespace in Container.objects.filter(workload__cluster=split).values_list(
        "workload__namespace", flat=True
    ):
        sizes[namespace] = sizes.get(namespace, 0) + 1
    # Both kinds of window: namespaces of their own and the rest together.
    assert min(sizes.values()) < 24 // 4 <= max(sizes.values())
    assert "steady_windows" not in one_runs[-1].counts
    assert 1 < split_runs[-1].counts["steady_windows"] < len(sizes)
    # Warm: the last cycle took every row the one before kept, as one window does.
    assert split_runs[-1].counts["engine_rows_kept"] == containers
    assert one_runs[-1].counts["engine_rows_kept"] == containers
    assert warm_state.count() == containers
    for a, b in zip(one_runs, split_runs, strict=True):
        assert a.counts["samples"] == b.counts["samples"]
    assert stored(split) == stored(one)


@pytest.mark.django_db
def test_a_whole_pass_by_shard_leaves_new_namespaces_to_their_shards_whole(
    settings, fleet
):
    """In ``first_contact_by_shard`` (a worker's whole-cluster refresh) a namespace
    with no stored workload is not stored by the whole pass: its shard's refresh
    discovers, stores and first contacts it, handed out before the pass's node pools.
    The state after the shards and one more whole cycle equals the serial refresh's,
    discovery's rows included."""
    settings.FIRST_CONTACT_CHUNK_CONTAINERS = 4
    serial, _ = refresh_twice(settings, "serial", chunk=4)

    sharded = Cluster.objects.create(name="sharded", kind=Cluster.Kind.SIMULATED)
    handed_out = []

    def hand_out(namespaces: list[str]) -> None:
        # Handed out before the pass's last steps (node pools, totals), once.
        handed_out.append(
            (namespaces, NodePool.objects.filter(cluster=sharded).exists())
        )

    with chunking.first_contact_by_shard(hand_out) as deferred:
        whole = refresh_cluster(cluster_id=sharded.pk, now=NOW)
    assert whole.status == RefreshRun.Status.SUCCEEDED, whole.error
    assert whole.counts["node_pools"] > 0
    assert handed_out == [(sorted(deferred), False)]
    namespaces = set(
        Workload.objects.filter(cluster=serial).values_list("namespace", flat=True)
    )
    assert len(namespaces) >= 2
    assert deferred == namespaces
    assert whole.counts["first_contact_shards"] == len(namespaces)
    assert whole.counts["workloads"] == whole.counts["samples"] == 0
    assert not Workload.objects.filter(cluster=sharded).exists()
    for namespace in sorted(namespaces):
        shard = refresh_cluster(cluster_id=sharded.pk, now=NOW, namespace=namespace)
        assert shard.status == RefreshRun.Status.SUCCEEDED, shard.error
        assert shard.counts["workloads_new"] > 0
    # Every namespace stored now: the next whole pass defers nothing.
    with chunking.first_contact_by_shard() as deferred:
        again = refresh_cluster(cluster_id=sharded.pk, now=NOW + timedelta(minutes=1))
    assert again.status == RefreshRun.Status.SUCCEEDED, again.error
    assert deferred == set()
    assert "first_contact_shards" not in again.counts
    assert again.counts["workloads"] == len(serial.workloads.all())
    assert stored(sharded) == stored(serial)
    assert discovery_of(sharded) == discovery_of(serial)


def discovery_of(cluster):
    """What discovery stored of ``cluster`` (workloads, containers, policies, pods,
    LimitRanges, checkpoints' watermarks), by names, without ids."""

    def rows(queryset, *fields):
        return sorted(tuple(map(repr, row)) for row in queryset.values_list(*fields))

    workloads = Workload.objects.filter(cluster=cluster)
    of = {"workload__cluster": cluster}
    return (
        rows(
            workloads,
            "namespace",
            "kind",
            "name",
            "uid",
            "selector",
            "replicas",
            "labels",
            "schedule",
            "is_active",
            "first_seen_at",
            "last_seen_at",
            "running_hours_month",
        ),
        rows(
            Container.objects.filter(**of),
            "workload__namespace",
            "workload__name",
            "name",
            "kind",
            "position",
            "request_cpu_millicores",
            "request_memory_bytes",
            "limit_cpu_millicores",
            "limit_memory_bytes",
            "template_resources",
            "resource_sources",
        ),
        rows(
            Policy.objects.filter(**of),
            "workload__namespace",
            "workload__name",
            "mode",
            "profile",
            "source",
            "container_policies",
            "min_replicas",
            "approval",
            "vpa_object",
            "vpa_object_mode",
        ),
        rows(
            WorkloadPod.objects.filter(cluster=cluster),
            "workload__namespace",
            "workload__name",
            "name",
            "uid",
            "owner_kind",
            "owner_name",
            "containers",
            "first_seen_at",
            "last_seen_at",
            "started_at",
            "ran_until",
            "limit_ranger",
        ),
        rows(
            NamespaceLimitRange.objects.filter(cluster=cluster),
            "namespace",
        ),
        rows(
            Checkpoint.objects.filter(container__workload__cluster=cluster),
            "container__workload__namespace",
            "container__workload__name",
            "container__name",
            "histogram_key",
            "last_sample_at",
            "version",
        ),
    )


@pytest.mark.django_db
def test_discovery_tells_the_workloads_met_for_the_first_time_as_a_read_would(fleet):
    """The upsert's read of the containers gives the workloads with a checkpoint
    without a watermark (``Discovery.fresh``) instead of a statement of its own:
    new workloads, a checkpoint an expiry reset, a container whose checkpoint row
    was gone, all as the checkpoints read afterwards say."""
    from recommender.services.connections import cluster_adapter_for
    from recommender.services.refresh.discovery import upsert_discovery

    cluster = Cluster.objects.create(name="fresh", kind="simulated")
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    containers = Container.objects.filter(
        workload__cluster=cluster, checkpoint__isnull=False
    ).order_by("pk")
    reset, gone = containers[0], containers[len(containers) - 1]
    Checkpoint.objects.filter(container=reset).update(last_sample_at=None)
    Checkpoint.objects.filter(container=gone).delete()
    # A workload deleted (its rows with it): met again for the first time.
    new = (
        Workload.objects.filter(cluster=cluster)
        .exclude(pk__in=[reset.workload_id, gone.workload_id])
        .first()
    )
    Workload.objects.filter(pk=new.pk).delete()
    later = NOW + timedelta(minutes=1)

    adapter = cluster_adapter_for(cluster, now=later)
    discovery = upsert_discovery(
        cluster=cluster, snapshot=adapter.discover(), now=later
    )

    assert discovery.fresh is not None
    told = chunking.fresh_workloads(discovery)
    read = chunking.fresh_workloads(dataclasses.replace(discovery, fresh=None))
    assert told == read
    key = (new.namespace, new.kind, new.name)
    assert told == {reset.workload_id, gone.workload_id, discovery.workload_by_key[key]}
