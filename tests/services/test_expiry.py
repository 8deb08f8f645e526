"""Hourly expiry: chunk by chunk, resetting checkpoints (not deleting them), so a
refresh racing it never fails and the next refresh rebuilds from history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db.models.signals import post_init

from recommender.engine import AggregateSet
from recommender.models import Checkpoint, Cluster, Policy, RefreshRun, Workload
from recommender.services.refresh import expiry, ingest
from recommender.services.refresh.cycle import refresh_cluster
from recommender.services.refresh.expiry import expire_idle_aggregates

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
LATE = NOW + timedelta(days=8, minutes=1)  # every aggregate of NOW is idle by then
# The savings trend is thinned by the same run; these tests keep no old snapshot.
NO_SNAPSHOTS = {"snapshots_dropped": 0, "snapshots_thinned": 0}


@pytest.fixture(autouse=True)
def small_fleet(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 12
    settings.SIMULATION_HISTORY_DAYS = 1.0


@pytest.fixture
def cluster(db):
    cluster = Cluster.objects.create(name="sim-x", kind=Cluster.Kind.SIMULATED)
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    return cluster


def checkpoints(cluster):
    return Checkpoint.objects.filter(container__workload__cluster=cluster)


def test_expiry_resets_the_state_and_keeps_the_row(cluster):
    before = {c.pk: c.version for c in checkpoints(cluster)}

    run = expire_idle_aggregates(now=LATE)

    assert run.counts == {
        "checked": len(before),
        "expired": len(before),
        "failed": 0,
        **NO_SNAPSHOTS,
    }
    after = list(checkpoints(cluster))
    assert {c.pk for c in after} == set(before)
    for checkpoint in after:
        assert bytes(checkpoint.state) == b""
        assert checkpoint.histogram_key == ""
        assert checkpoint.last_sample_at is None
        assert checkpoint.sample_count == 0
        assert checkpoint.version == before[checkpoint.pk] + 1
    # A reset row is not checked again.
    assert expire_idle_aggregates(now=LATE).counts == {
        "checked": 0,
        "expired": 0,
        "failed": 0,
        **NO_SNAPSHOTS,
    }


def test_the_next_refresh_rebuilds_an_expired_state_from_history(cluster):
    expire_idle_aggregates(now=LATE)

    run = refresh_cluster(cluster_id=cluster.pk, now=LATE)

    assert run.status == RefreshRun.Status.SUCCEEDED
    for checkpoint in checkpoints(cluster):
        assert checkpoint.histogram_key != ""
        assert checkpoint.last_sample_at == LATE
        assert checkpoint.sample_count > 0


def test_a_refresh_racing_expiry_does_not_fail(cluster, monkeypatch):
    load_rows = ingest.load_rows

    def expire_then_load(window):
        # Expiry commits between the refresh's discovery and its loading of rows.
        expire_idle_aggregates(now=LATE)
        load_rows(window)

    monkeypatch.setattr(ingest, "load_rows", expire_then_load)
    run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))

    assert run.status == RefreshRun.Status.SUCCEEDED
    assert run.counts["errors"] == 0
    # The refresh saw the reset rows and rebuilt them from history.
    assert all(c.sample_count > 0 for c in checkpoints(cluster))


def test_expiry_processes_each_chunk_as_it_arrives(cluster, monkeypatch):
    # Two histogram keys, so two groups fill their buffers side by side.
    Policy.objects.filter(workload__cluster=cluster, workload__name__lt="m").update(
        profile_overrides={"cpu_half_life_s": 43200.0}
    )
    refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))
    keys = set(checkpoints(cluster).values_list("histogram_key", flat=True))
    assert len(keys) == 2
    total = checkpoints(cluster).count()
    batch = 3
    monkeypatch.setattr(expiry, "BATCH", batch)
    loaded = 0
    loaded_at_each_batch: list[tuple[int, int]] = []

    def count(sender, **kwargs):
        nonlocal loaded
        loaded += 1

    from_checkpoints = AggregateSet.from_checkpoints

    def spy(profile, blobs):
        loaded_at_each_batch.append((loaded, len(blobs)))
        return from_checkpoints(profile, blobs)

    monkeypatch.setattr(AggregateSet, "from_checkpoints", staticmethod(spy))
    post_init.connect(count, sender=Checkpoint)
    try:
        run = expire_idle_aggregates(now=LATE)
    finally:
        post_init.disconnect(count, sender=Checkpoint)

    assert total > 4 * batch
    assert run.counts == {
        "checked": total,
        "expired": total,
        "failed": 0,
        **NO_SNAPSHOTS,
    }
    assert all(size <= batch for _, size in loaded_at_each_batch)
    # The first batch is judged long before every row is loaded: at most one buffer
    # per key plus the database chunk in flight.
    assert loaded_at_each_batch[0][0] <= 3 * batch


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda blob: b"not a checkpoint", id="garbage"),
        pytest.param(lambda blob: blob[: len(blob) // 2], id="truncated"),
        pytest.param(lambda blob: blob[:1] + b"\xff" * (len(blob) - 1), id="scrambled"),
    ],
)
def test_an_unreadable_checkpoint_is_counted_and_the_job_keeps_going(
    cluster, monkeypatch, caplog, damage
):
    # Small batches: the bad row shares its batch with good ones, and more follow.
    monkeypatch.setattr(expiry, "BATCH", 4)
    rows = list(checkpoints(cluster).order_by("pk"))
    bad = rows[5]
    # The likely case: the checkpoint of a workload deleted from its cluster.
    Workload.objects.filter(pk=bad.container.workload_id).update(is_active=False)
    Checkpoint.objects.filter(pk=bad.pk).update(state=damage(bytes(bad.state)))

    run = expire_idle_aggregates(now=LATE)

    assert run.status == RefreshRun.Status.SUCCEEDED
    assert run.counts == {
        "checked": len(rows),
        "expired": len(rows) - 1,
        "failed": 1,
        **NO_SNAPSHOTS,
    }
    left = Checkpoint.objects.get(pk=bad.pk)
    assert (left.version, left.histogram_key) == (bad.version, bad.histogram_key)
    others = checkpoints(cluster).exclude(pk=bad.pk)
    assert set(others.values_list("histogram_key", flat=True)) == {""}
    assert f"cannot read the checkpoint of container {bad.container_id}" in caplog.text


def test_every_unreadable_checkpoint_is_counted(cluster):
    rows = list(checkpoints(cluster).order_by("pk"))
    Checkpoint.objects.filter(pk__in=[r.pk for r in rows[:3]]).update(state=b"\x00")

    run = expire_idle_aggregates(now=LATE)

    assert run.counts == {
        "checked": len(rows),
        "expired": len(rows) - 3,
        "failed": 3,
        **NO_SNAPSHOTS,
    }
