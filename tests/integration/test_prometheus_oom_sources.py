"""OOM kills from every place that reports them, against a real Prometheus.

A Prometheus scraping only the kubelet's cAdvisor endpoint (no kube-state-metrics)
has every usage series and no OOM series; the pod statuses discovery reads still say
``lastState.terminated.reason: OOMKilled``. Those kills must count (risk, OOM bump),
and the cluster must say its OOM history is missing. With kube-state-metrics, the
same kill reported by both places is stored once.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from recommender.models import Cluster, OomKill, RefreshRun, Workload
from recommender.services.readmodels.provisioning import Prices, risk_rules
from recommender.services.refresh.cycle import refresh_cluster
from tests.integration.test_prometheus_backfill import (
    assert_same,
    checkpoint_recommendations,
    offline_recommendations,
)
from tests.k8s_fake.server import FakeApiServer, write_kubeconfig
from tests.prometheus_support.fixtures import (
    prometheus_cadvisor_only,
    prometheus_with_history,
)
from tests.prometheus_support.k8s_objects import objects_for
from tests.web.conftest import client_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
__all__ = ["prometheus_cadvisor_only", "prometheus_with_history"]  # fixtures

DAY = 86_400


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def iso(seconds: float) -> str:
    return at(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


def with_oom_status(objects: list[dict], *, pod: str, container: str, killed_s: int):
    """The pod's container as the kubelet reports it after an OOM kill and restart."""
    for obj in objects:
        if obj["kind"] != "Pod" or obj["metadata"]["name"] != pod:
            continue
        for status in obj["status"]["containerStatuses"]:
            if status["name"] != container:
                continue
            status["restartCount"] = 1
            status["state"] = {"running": {"startedAt": iso(killed_s + 10)}}
            status["lastState"] = {
                "terminated": {
                    "exitCode": 137,
                    "reason": "OOMKilled",
                    "startedAt": "2026-11-01T00:00:00Z",
                    "finishedAt": iso(killed_s),
                }
            }
    return objects


@pytest.fixture
def refresh_against(tmp_path: Path, settings, monkeypatch):
    """Run refresh_cluster with a fake API server serving ``objects`` and Prometheus
    at ``url``: the composition root builds both, as in production."""
    servers: list[FakeApiServer] = []

    def start(url: str, objects: list[dict]) -> Cluster:
        server = FakeApiServer(objects).start()
        servers.append(server)
        kubeconfig = write_kubeconfig(
            tmp_path / "kubeconfig", {"fake": server}, current="fake"
        )
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        settings.PROMETHEUS_URL = url
        settings.PROMETHEUS_BACKFILL_DAYS = 8
        settings.CHECKPOINT_INTERVAL_S = 0
        return Cluster.objects.create(
            name="prod", kind=Cluster.Kind.KUBERNETES, context="fake"
        )

    yield start
    for server in servers:
        server.stop()


def db_spec(loaded):
    (db,) = (s for s in loaded.specs if s.oom_at_s is not None)
    return db


def test_without_kube_state_metrics_the_pod_status_kill_counts(
    prometheus_cadvisor_only, refresh_against, tmp_path, admin_user
):
    loaded = prometheus_cadvisor_only
    db = db_spec(loaded)
    objects = with_oom_status(
        objects_for(loaded.specs, live_at_s=loaded.end_s),
        pod=db.pod,
        container=db.container,
        killed_s=db.oom_at_s,
    )
    cluster = refresh_against(loaded.url, objects)

    run = refresh_cluster(cluster_id=cluster.pk, now=at(loaded.end_s))
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    assert run.counts["oom_kills_new"] == 1
    assert run.counts["oom_kills_accepted"] == 1
    assert run.counts["oom_history_missing"] == 1
    kill = OomKill.objects.get()
    assert kill.occurred_at == at(db.oom_at_s)
    assert kill.memory_request_bytes == db.memory_request_bytes

    # The workload is at risk ...
    workload = (
        Workload.objects.filter(name="db")
        .with_provisioning(
            prices=Prices.from_settings(), rules=risk_rules(at(loaded.end_s))
        )
        .get()
    )
    assert workload.recent_ooms == 1 and workload.risk > 0
    # ... and its memory target has upstream's OOM bump: exactly what the offline
    # command gives for the same samples and that kill, not what it gives without.
    expected = offline_recommendations(loaded, tmp_path)
    got = checkpoint_recommendations()
    assert_same(got, expected)
    without = offline_recommendations(loaded, tmp_path, with_ooms=False)
    key = ("shop", "db", "postgres")
    assert got[key]["target"]["memory"] != without[key]["target"]["memory"]

    # The cluster says so, once: on the overview and in the API.
    cluster.refresh_from_db()
    assert cluster.oom_history_missing_since == at(loaded.end_s)
    client = client_for(admin_user)
    page = client.get("/").content.decode()
    assert page.count("no OOM series in the usage source") == 1
    (listed,) = client.get("/api/v1/clusters/").json()["results"]
    assert listed["oom_history_missing_since"] is not None

    # The next cycle stores the same kill again? No: it is stored once.
    again = refresh_cluster(
        cluster_id=cluster.pk, now=at(loaded.end_s) + timedelta(minutes=1)
    )
    assert again.status == RefreshRun.Status.SUCCEEDED, again.error
    assert again.counts.get("oom_kills_new", 0) == 0
    assert OomKill.objects.count() == 1


def test_with_kube_state_metrics_one_kill_seen_twice_is_stored_once(
    prometheus_with_history, refresh_against, tmp_path
):
    """The status says the container died 40 s before the scrape that saw it restart:
    one kill, at the history's time (on the sample grid); the cluster has OOM series."""
    loaded = prometheus_with_history
    db = db_spec(loaded)
    objects = with_oom_status(
        objects_for(loaded.specs, live_at_s=loaded.end_s),
        pod=db.pod,
        container=db.container,
        killed_s=db.oom_at_s - 40,
    )
    cluster = refresh_against(loaded.url, objects)
    for moment in (db.oom_at_s - 120, db.oom_at_s, loaded.end_s):
        run = refresh_cluster(cluster_id=cluster.pk, now=at(moment))
        assert run.status == RefreshRun.Status.SUCCEEDED, run.error
        assert run.counts["oom_history_missing"] == 0
    assert list(OomKill.objects.values_list("occurred_at", flat=True)) == [
        at(db.oom_at_s)
    ]
    cluster.refresh_from_db()
    assert cluster.oom_history_missing_since is None
    expected = offline_recommendations(
        loaded, tmp_path, start_s=db.oom_at_s - 120 - 8 * DAY
    )
    assert_same(checkpoint_recommendations(), expected)
