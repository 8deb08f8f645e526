"""Celery tasks in eager mode: JSON-only arguments, thin wrappers of the services."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache
from kombu.exceptions import EncodeError

from recommender.errors import InvalidInput
from recommender.models import Cluster, RefreshRun, Workload
from recommender.tasks import CLAIM_KEY, WHOLE_CLUSTER_EVERY_S
from recommender.tasks import expire_idle_aggregates as expire_idle_aggregates_task
from recommender.tasks import refresh_all_clusters as refresh_all_clusters_task
from recommender.tasks import refresh_cluster as refresh_cluster_task
from vpaweb.celery import app as celery_app


@pytest.fixture(autouse=True)
def small_fleet(settings):
    settings.SIMULATION_WORKLOADS = 6
    settings.SIMULATION_HISTORY_DAYS = 0.25
    # Eager here even when REDIS_URL is set: tests/integration covers the real worker.
    conf = celery_app.conf
    saved = (conf.task_always_eager, conf.task_eager_propagates)
    conf.task_always_eager = conf.task_eager_propagates = True
    yield
    conf.task_always_eager, conf.task_eager_propagates = saved


@pytest.fixture(autouse=True)
def no_claims_left(db):
    """Claims live in the cache (Redis under the PostgreSQL pass): none outlives a
    test, so a reused cluster id of a later test or run is never skipped."""
    yield
    namespaces = set(Workload.objects.values_list("namespace", flat=True))
    cache.delete_many(
        [
            CLAIM_KEY.format(cluster_id=cluster_id, shard=shard)
            for cluster_id in Cluster.objects.values_list("pk", flat=True)
            for shard in [*namespaces, "*"]
        ]
    )


def test_refresh_task_runs_the_service_and_returns_a_json_summary(db):
    cluster = Cluster.objects.create(name="sim-t", kind=Cluster.Kind.SIMULATED)

    result = refresh_cluster_task.delay(cluster.pk, "2026-11-21T12:00:00+00:00").get()

    run = RefreshRun.objects.get(pk=result["run_id"])
    assert result["status"] == run.status == RefreshRun.Status.SUCCEEDED
    assert result["counts"]["workloads"] == 6


def test_eager_tasks_refuse_what_json_cannot_carry(db):
    with pytest.raises(EncodeError):
        refresh_cluster_task.delay(object())


def test_a_bad_time_is_rejected_naming_the_field(db):
    cluster = Cluster.objects.create(name="sim-t", kind=Cluster.Kind.SIMULATED)
    with pytest.raises(InvalidInput) as caught:
        refresh_cluster_task.delay(cluster.pk, "yesterday").get()
    assert caught.value.field == "now"


def test_a_cluster_that_is_gone_is_logged_and_skipped(db):
    assert refresh_cluster_task.delay(424242).get() == {
        "cluster_id": 424242,
        "status": "gone",
    }


def test_refresh_all_and_expire_cover_every_enabled_cluster(db, settings):
    settings.REDIS_URL = ""  # the embedded default: each cluster whole, in-process
    on = Cluster.objects.create(name="on", kind=Cluster.Kind.SIMULATED)
    Cluster.objects.create(name="off", kind=Cluster.Kind.SIMULATED, is_enabled=False)

    summary = refresh_all_clusters_task.delay("2026-11-21T12:00:00+00:00").get()

    assert summary == {"queued": [on.pk], "failed": [], "skipped": []}
    assert RefreshRun.objects.filter(cluster__name="off").count() == 0
    expired = expire_idle_aggregates_task.delay(
        datetime(2026, 11, 21, 13, tzinfo=UTC).isoformat()
    ).get()
    assert expired["counts"]["expired"] == 0
    assert expired["counts"]["checked"] > 0


def test_with_a_broker_refresh_all_fans_out_one_task_per_namespace(
    db, settings, django_capture_on_commit_callbacks
):
    cluster = Cluster.objects.create(name="sim-t", kind=Cluster.Kind.SIMULATED)
    new = Cluster.objects.create(name="sim-new", kind=Cluster.Kind.SIMULATED)
    refresh_cluster_task.delay(cluster.pk, "2026-11-21T12:00:00+00:00").get()
    namespaces = sorted(
        set(
            Workload.objects.filter(cluster=cluster).values_list("namespace", flat=True)
        )
    )
    # Tasks still run in-process here (eager), but the fan-out is the broker's.
    settings.REDIS_URL = "redis://127.0.0.1:6379/14"

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        summary = refresh_all_clusters_task.delay("2026-11-21T12:05:00+00:00").get()

    assert summary["failed"] == []
    assert summary["queued"] == [[cluster.pk, ns] for ns in namespaces] + [new.pk]
    # A task queued per shard and for the new cluster (besides the refreshes' own
    # work after their commits: the webhook's journal pruned, the hour's savings
    # snapshot remembered).
    queued = [
        c for c in callbacks if getattr(c, "func", None) == refresh_cluster_task.delay
    ]
    assert len(queued) == len(namespaces) + 1
    shards = RefreshRun.objects.filter(cluster=cluster).exclude(shard="")
    assert sorted(shards.values_list("shard", flat=True)) == namespaces
    assert set(shards.values_list("status", flat=True)) == {RefreshRun.Status.SUCCEEDED}
    # A cluster never discovered is refreshed whole, which finds its namespaces.
    assert RefreshRun.objects.get(cluster=new).shard == ""
    assert Workload.objects.filter(cluster=new).exists()


NOON = datetime(2026, 11, 21, 12, tzinfo=UTC)


def fan_out(at, capture):
    with capture(execute=True):
        return refresh_all_clusters_task.delay(at.isoformat()).get()


def namespaces_of(cluster, **filters):
    return sorted(
        set(
            Workload.objects.filter(cluster=cluster, **filters).values_list(
                "namespace", flat=True
            )
        )
    )


def test_with_a_broker_a_cluster_is_refreshed_whole_every_ten_minutes(
    db, settings, django_capture_on_commit_callbacks
):
    settings.REDIS_URL = "redis://127.0.0.1:6379/14"  # fan out, though still eager
    cluster = Cluster.objects.create(name="sim-t", kind=Cluster.Kind.SIMULATED)
    assert fan_out(NOON, django_capture_on_commit_callbacks)["queued"] == [cluster.pk]
    namespaces = namespaces_of(cluster)
    # Every workload of one namespace vanished: that namespace has no shard now.
    gone = namespaces[0]
    Workload.objects.filter(cluster=cluster, namespace=gone).update(is_active=False)

    soon = fan_out(NOON + timedelta(minutes=5), django_capture_on_commit_callbacks)
    due = NOON + timedelta(seconds=WHOLE_CLUSTER_EVERY_S)
    whole = fan_out(due, django_capture_on_commit_callbacks)
    after = fan_out(due + timedelta(minutes=1), django_capture_on_commit_callbacks)

    assert soon["queued"] == [[cluster.pk, ns] for ns in namespaces[1:]]
    # The whole pass finds the namespace's workloads again, and its shard is back.
    assert whole["queued"] == [cluster.pk]
    assert namespaces_of(cluster, is_active=True) == namespaces
    assert after["queued"] == [[cluster.pk, ns] for ns in namespaces]
    cluster.refresh_from_db()
    assert cluster.last_discovered_at == due
    assert RefreshRun.objects.filter(cluster=cluster, shard=gone).count() == 1


def test_a_shard_still_queued_or_running_is_skipped_not_queued_again(
    db, settings, django_capture_on_commit_callbacks, caplog
):
    settings.REDIS_URL = "redis://127.0.0.1:6379/14"
    cluster = Cluster.objects.create(name="sim-t", kind=Cluster.Kind.SIMULATED)
    fan_out(NOON, django_capture_on_commit_callbacks)
    busy, *free = namespaces_of(cluster)
    # The last fan-out's claim of one shard is still held (its task is slow).
    cache.add(CLAIM_KEY.format(cluster_id=cluster.pk, shard=busy), 1, timeout=60)
    runs_before = RefreshRun.objects.filter(cluster=cluster, shard=busy).count()

    with caplog.at_level(logging.WARNING, logger="recommender.tasks"):
        summary = fan_out(
            NOON + timedelta(minutes=1), django_capture_on_commit_callbacks
        )

    assert summary["skipped"] == [[cluster.pk, busy]]
    assert summary["queued"] == [[cluster.pk, ns] for ns in free]
    assert RefreshRun.objects.filter(cluster=cluster, shard=busy).count() == runs_before
    assert f"shard '{busy}' skipped" in caplog.text
    # Finished shards gave their claims back; a running whole refresh blocks shards.
    assert all(
        cache.get(CLAIM_KEY.format(cluster_id=cluster.pk, shard=ns)) is None
        for ns in free
    )
    cache.add(CLAIM_KEY.format(cluster_id=cluster.pk, shard="*"), 1, timeout=60)
    blocked = fan_out(NOON + timedelta(minutes=2), django_capture_on_commit_callbacks)
    assert blocked["queued"] == []
    assert len(blocked["skipped"]) == len(free) + 1
