"""A real Celery worker (Redis broker, PostgreSQL) runs a refresh end to end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from recommender.models import Cluster, Recommendation, RefreshRun, Workload
from recommender.tasks import refresh_cluster as refresh_cluster_task
from tests.conftest import service_missing

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker(transactional_db):
    """A `celery worker --pool solo` on a private queue, using the test database."""
    if connection.vendor != "postgresql":
        service_missing("PostgreSQL (DATABASE_URL)")
    if not settings.REDIS_URL:
        service_missing("Redis (REDIS_URL)")
    try:
        import redis

        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2).ping()
    except Exception:
        service_missing(f"Redis at {settings.REDIS_URL}")
    queue = f"vpaweb-test-{uuid.uuid4().hex[:8]}"
    db = connection.settings_dict
    env = {
        **os.environ,
        # The worker must use pytest-django's test database, not the configured one.
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/"
        f"{db['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "SECRET_KEY": "integration-test-only",
        "VPAWEB_SIMULATION_WORKLOADS": "6",
        "VPAWEB_SIMULATION_HISTORY_DAYS": "0.25",
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "vpaweb",
            "worker",
            "--pool",
            "solo",
            "--queues",
            queue,
            "--loglevel",
            "WARNING",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        yield queue
    finally:
        process.terminate()
        try:
            output, _ = process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
        if process.returncode not in (0, -15):
            print(output.decode(errors="replace"))


def test_a_worker_runs_the_refresh_task_and_rows_appear(worker, settings):
    settings.SIMULATION_WORKLOADS = 6
    cluster = Cluster.objects.create(name="sim-worker", kind=Cluster.Kind.SIMULATED)

    result = refresh_cluster_task.apply_async(
        args=[cluster.pk, "2026-11-21T12:00:00+00:00"], queue=worker
    )
    summary = result.get(timeout=120)

    run = RefreshRun.objects.get(pk=summary["run_id"])
    assert run.status == RefreshRun.Status.SUCCEEDED
    assert Workload.objects.filter(cluster=cluster).count() == 6
    assert Recommendation.objects.filter(container__workload__cluster=cluster).exists()
    # The worker ran it, not this process: nothing ran eagerly here.
    assert not settings.CELERY_TASK_ALWAYS_EAGER
    deadline = time.monotonic() + 5
    while run.finished_at is None and time.monotonic() < deadline:
        run.refresh_from_db()
    assert run.finished_at is not None
