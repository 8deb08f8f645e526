"""vpaweb's own /metrics: the token, the text format, refresh runs counted by the
process that ran them, database gauges, and prometheus-client's multi-process mode
under a real gunicorn with two workers."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from recommender.errors import SourceUnavailable
from recommender.models import Cluster, RefreshRun
from recommender.services.refresh import cycle
from recommender.services.refresh.cycle import refresh_cluster
from tests.factories import make_cluster, make_recommendation, make_workload

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]
TOKEN = "metrics-token-for-tests"


def scrape(client, token: str | None = TOKEN):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.get("/metrics", **headers)


def value(text: str, series: str) -> float:
    """The value of one exact series line, e.g. 'name{a="b"}'."""
    found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
    assert found, f"{series} not in:\n{text}"
    return float(found.group(1))


@pytest.fixture
def token(settings):
    settings.METRICS_TOKEN = TOKEN


def test_metrics_are_off_without_a_token(client, db):
    response = scrape(client)

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert "VPAWEB_METRICS_TOKEN" in response.json()["error"]["message"]


@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {TOKEN}", "Bearer"])
def test_metrics_refuse_a_missing_or_wrong_token(client, db, token, header):
    extra = {"HTTP_AUTHORIZATION": header} if header else {}
    response = client.get("/metrics", **extra)

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert response.json()["error"]["code"] == "not_authenticated"


def test_metrics_answer_in_prometheus_text_format(client, db, token):
    response = scrape(client)

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    text = response.content.decode()
    # The hooks of the webhook and the updater are there from the start.
    for name in (
        "vpaweb_webhook_requests_total",
        "vpaweb_webhook_fail_opens_total",
        "vpaweb_webhook_request_duration_seconds",
        "vpaweb_updater_refused_429_total",
    ):
        assert f"# TYPE {name} " in text
    assert value(text, 'vpaweb_updater_applied_total{method="eviction"}') >= 0


def test_a_refresh_is_counted_with_its_phases_and_samples(client, db, token, settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 6
    settings.SIMULATION_HISTORY_DAYS = 1.0
    before = scrape(client).content.decode()
    cluster = Cluster.objects.create(name="sim-m", kind=Cluster.Kind.SIMULATED)
    ok = 'vpaweb_refresh_runs_total{kind="refresh",outcome="succeeded"}'
    total = (
        "vpaweb_refresh_phase_duration_seconds_count"
        '{kind="refresh",outcome="succeeded",phase="total"}'
    )
    samples = 'vpaweb_samples_ingested_total{kind="refresh"}'
    start = {s: value(before, s) if s in before else 0.0 for s in (ok, total, samples)}

    run = refresh_cluster(cluster_id=cluster.pk, now=NOW)

    text = scrape(client).content.decode()
    assert value(text, ok) == start[ok] + 1
    assert value(text, total) == start[total] + 1
    assert value(text, samples) == start[samples] + run.counts["samples"] > 0
    assert value(
        text,
        'vpaweb_refresh_last_finished_timestamp_seconds{kind="refresh",'
        'outcome="succeeded"}',
    ) == pytest.approx(run.finished_at.timestamp())
    assert value(text, 'vpaweb_containers_without_recommendation{cluster="sim-m"}') == 0
    assert value(text, 'vpaweb_refresh_runs_in_progress{kind="refresh"}') == 0


def test_a_failed_refresh_is_counted_as_failed(client, db, token, monkeypatch):
    cluster = Cluster.objects.create(name="sim-f", kind=Cluster.Kind.SIMULATED)
    failed = 'vpaweb_refresh_runs_total{kind="refresh",outcome="failed"}'
    text = scrape(client).content.decode()
    start = value(text, failed) if failed in text else 0.0

    def broken(c):
        raise SourceUnavailable("metrics backend down")

    monkeypatch.setattr(cycle, "usage_source_for", broken)
    with pytest.raises(SourceUnavailable):
        refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(hours=1))

    text = scrape(client).content.decode()
    assert value(text, failed) == start + 1
    assert RefreshRun.objects.get(cluster=cluster).status == RefreshRun.Status.FAILED


def test_containers_without_recommendation_are_counted_per_enabled_cluster(
    client, db, token
):
    cluster = make_cluster("c1")
    first = make_workload(cluster, "a")
    make_workload(
        cluster, "b", containers={"x": {}, "y": {}, "setup": {"kind": "init"}}
    )
    hidden = make_workload(make_cluster("off", is_enabled=False), "c")
    assert hidden.containers.count() == 1

    text = scrape(client).content.decode()
    assert value(text, 'vpaweb_containers_without_recommendation{cluster="c1"}') == 3
    assert 'cluster="off"' not in text

    make_recommendation(first.containers.get())
    text = scrape(client).content.decode()
    assert value(text, 'vpaweb_containers_without_recommendation{cluster="c1"}') == 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_gunicorn_workers_and_other_processes_add_up_in_one_scrape(tmp_path):
    """Multi-process mode for real: two other processes count webhook requests into
    PROMETHEUS_MULTIPROC_DIR; gunicorn with two workers serves their sum."""
    multiproc = tmp_path / "metrics"
    multiproc.mkdir()
    env = {
        **os.environ,
        "PROMETHEUS_MULTIPROC_DIR": str(multiproc),
        "SECRET_KEY": "test-only-key",
        "VPAWEB_VAR_DIR": str(tmp_path / "var"),
        "VPAWEB_METRICS_TOKEN": TOKEN,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    env.pop("REDIS_URL", None)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
    )
    count = (
        "from recommender import metrics; "
        "metrics.WEBHOOK_REQUESTS.labels(resource='pods', outcome='patched').inc({})"
    )
    for amount in (2, 3):
        subprocess.run(
            [sys.executable, "-c", count.format(amount)],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=60,
        )
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            # The production configuration: its preloaded app forks the workers.
            "-c",
            "vpaweb/gunicorn_conf.py",
            "vpaweb.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "2",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        answers = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(answers) < 4:
            try:
                answer = requests.get(
                    f"http://127.0.0.1:{port}/metrics",
                    headers={"Authorization": f"Bearer {TOKEN}"},
                    timeout=60,
                )
            except requests.ConnectionError:
                time.sleep(0.2)
                continue
            answers.append(answer)
    finally:
        server.terminate()
        # Past gunicorn's graceful timeout (30 s, gunicorn_conf.py): a worker still
        # booting when the signal comes is waited for that long, then killed (a
        # loaded machine's make test saw it, and this wait was exactly 30 s).
        output = server.communicate(timeout=90)[0].decode(errors="replace")
    assert len(answers) == 4, output
    series = 'vpaweb_webhook_requests_total{outcome="patched",resource="pods"}'
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert value(answer.text, series) == 5


def test_a_run_whose_worker_was_lost_is_counted_as_failed_when_reaped(
    client, db, token, settings
):
    settings.SIMULATION_WORKLOADS = 3
    settings.SIMULATION_HISTORY_DAYS = 0.1
    cluster = Cluster.objects.create(name="sim-l", kind=Cluster.Kind.SIMULATED)
    lost = RefreshRun.objects.create(
        cluster=cluster, kind="refresh", started_at=NOW - timedelta(days=1)
    )
    failed = 'vpaweb_refresh_runs_total{kind="refresh",outcome="failed"}'
    text = scrape(client).content.decode()
    start = value(text, failed) if failed in text else 0.0

    refresh_cluster(cluster_id=cluster.pk, now=NOW)

    lost.refresh_from_db()
    assert lost.status == RefreshRun.Status.FAILED
    assert value(scrape(client).content.decode(), failed) == start + 1
