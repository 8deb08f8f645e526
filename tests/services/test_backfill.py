"""Back-fill through the service and `manage.py backfill` on the simulated cluster:
progress on the run row as each day commits, and the command's progress bar."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from recommender.models import Checkpoint, Cluster, RefreshRun
from recommender.services.refresh.backfill import backfill_cluster

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def small_fleet(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 8


@pytest.fixture
def cluster(db):
    return Cluster.objects.create(name="sim-b", kind=Cluster.Kind.SIMULATED)


def test_the_run_row_shows_progress_as_each_day_commits(cluster):
    seen = []

    def on_progress(run):
        stored = RefreshRun.objects.get(pk=run.pk)
        marks = set(
            Checkpoint.objects.filter(container__workload__cluster=cluster)
            .exclude(last_sample_at=None)
            .values_list("last_sample_at", flat=True)
        )
        seen.append((stored.progress, stored.counts.get("steps_done"), len(marks)))

    run = backfill_cluster(
        cluster_id=cluster.pk, now=NOW, days=3, on_progress=on_progress
    )

    assert run.status == RefreshRun.Status.SUCCEEDED
    assert run.counts["steps"] == 3
    # Stored before each report: progress, the finished days and their watermarks.
    assert [s[:2] for s in seen] == [(1 / 3, 1), (2 / 3, 2), (1.0, 3), (1.0, 3)]
    assert all(marks == 1 for *_, marks in seen)
    # Every container's checkpoint is written once per day; the phases add up.
    containers = Checkpoint.objects.filter(container__workload__cluster=cluster)
    assert run.counts["checkpoints_written"] == 3 * containers.count() > 0
    assert set(run.timings) == {
        "discover_s",
        "upsert_s",
        "ingest_s",
        "recommend_s",
        "store_s",
        "totals_s",
        "total_s",
    }
    assert (
        sum(v for k, v in run.timings.items() if k != "total_s")
        <= (run.timings["total_s"])
    )


def test_the_command_draws_a_progress_bar_per_day_and_a_summary(cluster):
    out, err = io.StringIO(), io.StringIO()

    call_command(
        "backfill",
        cluster="sim-b",
        days=2,
        now="2026-11-21T12:00:00Z",
        stdout=out,
        stderr=err,
    )

    bars = [line for line in err.getvalue().splitlines() if "[" in line]
    assert bars[0].startswith(
        "all namespaces: [" + "#" * 15 + "." * 15 + "]  50% day 1/2"
    )
    assert bars[-1].startswith("all namespaces: [" + "#" * 30 + "] 100% day 2/2")
    assert "sim-b all namespaces:" in out.getvalue()
    run = RefreshRun.objects.get(kind=RefreshRun.Kind.BACKFILL)
    assert run.progress == 1.0 and run.counts["steps_done"] == 2


def test_the_command_names_an_unknown_cluster(cluster):
    with pytest.raises(CommandError, match="--cluster 'nope' does not exist"):
        call_command("backfill", cluster="nope", stdout=io.StringIO())


def test_a_namespace_backfill_reports_the_namespace_containers(cluster):
    """Whether there is history to read or not, the summary counts the shard's
    containers, not 0."""
    from recommender.models import Container
    from recommender.services.refresh.cycle import refresh_cluster

    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    namespace = (
        Container.objects.filter(workload__cluster=cluster)
        .values_list("workload__namespace", flat=True)
        .first()
    )
    in_namespace = Container.objects.filter(
        workload__cluster=cluster,
        workload__namespace=namespace,
        workload__is_active=True,
    ).count()
    out = io.StringIO()

    call_command(
        "backfill",
        cluster="sim-b",
        namespace=[namespace],
        days=1,
        now="2026-11-21T12:00:00Z",
        stdout=out,
        stderr=io.StringIO(),
    )

    assert in_namespace >= 1
    assert f"sim-b {namespace}: {in_namespace} containers" in out.getvalue(), (
        out.getvalue()
    )
