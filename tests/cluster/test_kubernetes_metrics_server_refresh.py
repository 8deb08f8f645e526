"""metrics-server through real refresh cycles: each live sample enters the engine
exactly once, whatever second of the minute the scheduler runs at and whenever
metrics-server scraped (before or after the last minute boundary, before or after the
refresh)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest

from recommender.models import Checkpoint, Cluster, RefreshRun
from recommender.services.refresh.cycle import refresh_cluster
from tests.k8s_fake.plugin import api_server, kubeconfig
from tests.k8s_fake.server import load_fixtures

__all__ = ["api_server", "kubeconfig"]  # fixtures, for pytest

BASE = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
MINUTES = 4


@pytest.fixture
def kubernetes_cluster(db, kubeconfig, monkeypatch, settings):
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    settings.PROMETHEUS_URL = ""  # usage from metrics-server
    settings.KUBERNETES_RETRIES = 1
    settings.KUBERNETES_BACKOFF_S = 0.01
    settings.KUBERNETES_READ_TIMEOUT_S = 0.5
    return Cluster.objects.create(
        name="fake", kind=Cluster.Kind.KUBERNETES, context="fake"
    )


def scrape(api_server, at: datetime) -> None:
    """metrics-server replaces every pod's sample with one taken ``at``."""
    for item in load_fixtures("podmetrics"):
        fresh = copy.deepcopy(item)
        meta = fresh["metadata"]
        api_server.remove("PodMetrics", meta["namespace"], meta["name"])
        fresh["timestamp"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        api_server.add(fresh)


def db_samples() -> int:
    return Checkpoint.objects.get(
        container__workload__name="db", container__name="postgres"
    ).sample_count


@pytest.mark.parametrize("refresh_second", [1, 5, 30, 59])
@pytest.mark.parametrize("scrape_second", [0, 3, 31, 58])
def test_every_sample_a_refresh_sees_is_fed_exactly_once(
    kubernetes_cluster, api_server, refresh_second, scrape_second
):
    # One scrape and one refresh per minute; a sample is expected once when some
    # refresh saw it before the next scrape replaced it.
    events = []
    for minute in range(MINUTES):
        start = BASE + timedelta(minutes=minute)
        events.append((start + timedelta(seconds=scrape_second), "scrape"))
        events.append((start + timedelta(seconds=refresh_second), "refresh"))
    events.sort()
    seen: set[datetime] = set()
    live = BASE - timedelta(seconds=60 - scrape_second)  # the previous minute's scrape
    scrape(api_server, live)
    for moment, what in events:
        if what == "scrape":
            scrape(api_server, moment)
            live = moment
            continue
        run = refresh_cluster(cluster_id=kubernetes_cluster.pk, now=moment)
        assert run.status == RefreshRun.Status.SUCCEEDED, run.error
        seen.add(live)
        assert db_samples() == len(seen), (moment, sorted(seen))
    assert len(seen) >= MINUTES - 1


def test_a_sample_not_scraped_again_is_not_fed_twice(kubernetes_cluster, api_server):
    scrape(api_server, BASE + timedelta(seconds=2))  # after the boundary
    for seconds in (5, 65, 125, 185):  # metrics-server lost the node: same sample
        refresh_cluster(
            cluster_id=kubernetes_cluster.pk, now=BASE + timedelta(seconds=seconds)
        )
        assert db_samples() == 1


def test_a_sample_taken_after_the_refresh_started_is_fed_by_the_next(
    kubernetes_cluster, api_server
):
    # Stamped a second after the cycle's `now` (its PodMetrics read comes later).
    scrape(api_server, BASE + timedelta(seconds=6))
    refresh_cluster(cluster_id=kubernetes_cluster.pk, now=BASE + timedelta(seconds=5))
    assert db_samples() <= 1
    refresh_cluster(cluster_id=kubernetes_cluster.pk, now=BASE + timedelta(seconds=65))
    assert db_samples() == 1
