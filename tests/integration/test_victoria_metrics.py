"""The Prometheus source against VictoriaMetrics (its Prometheus HTTP API): the same
back-fill and steady-cycle tests as test_prometheus_backfill, with the same expected
recommendations, from the same history."""

from __future__ import annotations

import pytest

from recommender.models import Checkpoint, Cluster, OomKill, RefreshRun
from recommender.services.refresh.backfill import backfill_cluster
from recommender.services.refresh.cycle import refresh_cluster
from tests.integration.test_prometheus_backfill import (
    DAY,
    assert_same,
    at,
    checkpoint_recommendations,
    offline_recommendations,
    oom_time,
    source_for,
    stored_recommendations,
)
from tests.k8s_fake.plugin import FAST
from tests.k8s_fake.server import FakeApiServer, write_kubeconfig
from tests.prometheus_support.k8s_objects import objects_for
from tests.prometheus_support.victoria import victoria_with_history

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
__all__ = ["victoria_with_history"]  # the fixture, imported for pytest


@pytest.fixture
def adapter(victoria_with_history, tmp_path):
    from recommender.cluster.kubernetes import KubernetesAdapter

    loaded = victoria_with_history
    server = FakeApiServer(objects_for(loaded.specs, live_at_s=loaded.end_s)).start()
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", {"fake": server}, current="fake"
    )
    adapter = KubernetesAdapter(
        cluster_name="prod", context="fake", kubeconfig=str(kubeconfig), settings=FAST
    )
    yield adapter
    adapter.close()
    server.stop()


@pytest.fixture
def cluster() -> Cluster:
    return Cluster.objects.create(name="prod", kind=Cluster.Kind.KUBERNETES)


def test_one_backfill_stores_exactly_the_offline_recommendations(
    victoria_with_history, adapter, cluster, tmp_path
):
    loaded = victoria_with_history
    run = backfill_cluster(
        cluster_id=cluster.pk,
        now=at(loaded.end_s),
        adapter=adapter,
        source=source_for(loaded.url),
    )
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    assert run.counts["series_unmatched"] == 0
    expected = offline_recommendations(loaded, tmp_path)
    assert_same(stored_recommendations(), expected)
    assert_same(checkpoint_recommendations(), expected)


def test_backfill_then_incremental_equals_the_offline_recommendations(
    victoria_with_history, adapter, cluster, tmp_path
):
    loaded = victoria_with_history
    source = source_for(loaded.url)
    first = backfill_cluster(
        cluster_id=cluster.pk,
        now=at(loaded.end_s - 3 * 3600),
        days=8,
        adapter=adapter,
        source=source,
    )
    assert first.status == RefreshRun.Status.SUCCEEDED, first.error
    assert first.counts["oom_kills_new"] == 1
    watermarks = set(Checkpoint.objects.values_list("last_sample_at", flat=True))
    assert watermarks == {at(loaded.end_s - 3 * 3600)}
    second = backfill_cluster(
        cluster_id=cluster.pk, now=at(loaded.end_s), adapter=adapter, source=source
    )
    assert second.status == RefreshRun.Status.SUCCEEDED, second.error
    assert second.counts["oom_kills_new"] == 0
    assert second.counts["samples"] == 5 * 180 * 2
    assert OomKill.objects.count() == 1
    expected = offline_recommendations(
        loaded, tmp_path, start_s=loaded.end_s - 3 * 3600 - 8 * DAY
    )
    assert_same(checkpoint_recommendations(), expected)


def test_the_minute_cycle_takes_oom_kills_from_victoria_metrics(
    victoria_with_history, adapter, tmp_path, settings, monkeypatch
):
    """refresh_cluster's steady cycles (first contact, then a cycle a minute across
    the OOM kill) equal one pass over the same samples, as with Prometheus."""
    loaded = victoria_with_history
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))  # the fake API
    settings.PROMETHEUS_URL = loaded.url
    settings.PROMETHEUS_BACKFILL_DAYS = 8
    settings.CHECKPOINT_INTERVAL_S = 0
    cluster = Cluster.objects.create(
        name="prod", kind=Cluster.Kind.KUBERNETES, context="fake"
    )
    oom = oom_time(loaded)
    moments = [oom - 120, oom - 60, oom, oom + 60, loaded.end_s]
    for moment in moments:
        run = refresh_cluster(cluster_id=cluster.pk, now=at(moment))
        assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    assert OomKill.objects.count() == 1
    assert OomKill.objects.get().occurred_at == at(oom)
    runs = RefreshRun.objects.filter(cluster=cluster).order_by("pk")
    assert [r.counts.get("oom_kills_new", 0) for r in runs] == [0, 0, 1, 0, 0]
    again = refresh_cluster(cluster_id=cluster.pk, now=at(loaded.end_s))
    assert again.counts["samples"] == 0 and again.counts.get("oom_kills_new", 0) == 0
    expected = offline_recommendations(loaded, tmp_path, start_s=moments[0] - 8 * DAY)
    assert_same(checkpoint_recommendations(), expected)
