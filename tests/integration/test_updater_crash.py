"""Crash leftovers are cleared within one interval: a real updater process killed
with SIGKILL between moving a change to ``applying`` and writing it leaves the lease
and the change; the next cycle takes the lease over (its process is gone), reads the
pod, sends the change back to ``approved`` and applies it. A graceful stop releases
the lease; a lease whose holder cannot be checked expires one interval after its
holder's last cycle."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection

from recommender.management.scheduler import run_periodic
from recommender.models import Cluster, Policy, ResizeChange, UpdaterLock, Workload
from recommender.services.actuation import control
from recommender.services.actuation.cycle import run_cycle
from recommender.services.refresh.cycle import refresh_cluster
from tests.conftest import service_missing
from tests.factories import make_cluster
from vpaweb.celery import app

ROOT = Path(__file__).resolve().parents[2]
NOON = datetime.fromisoformat("2026-11-21T12:00:00+00:00")
S = ResizeChange.Status
FLEET = {
    "VPAWEB_SIMULATION_SEED": "7",
    "VPAWEB_SIMULATION_WORKLOADS": "12",
    "VPAWEB_SIMULATION_HISTORY_DAYS": "0.25",
    "VPAWEB_UPDATER_INTERVAL_S": "60",
    # Six hours of simulated history: acted on (the minimum is another test's subject).
    "VPAWEB_MIN_HISTORY_HOURS": "0",
}


@pytest.fixture
def fleet(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 12
    settings.SIMULATION_HISTORY_DAYS = 0.25
    settings.UPDATER_INTERVAL_S = 60
    settings.MIN_HISTORY_HOURS = 0


def _acting_cluster(name: str) -> Cluster:
    cluster = Cluster.objects.create(
        name=name, kind=Cluster.Kind.SIMULATED, actuation_allowed=True
    )
    refresh_cluster(cluster_id=cluster.pk, now=NOON)
    acting = Workload.objects.filter(cluster=cluster, replicas__gte=2)
    Policy.objects.filter(workload__in=acting).update(
        mode="Recreate", approval="automatic"
    )
    return cluster


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_killed_updater_leaves_nothing_behind_for_long(fleet, tmp_path, caplog):
    if connection.vendor != "postgresql":
        service_missing("PostgreSQL (DATABASE_URL): the killed process shares the DB")
    cluster = _acting_cluster("sim-crash")
    db = connection.settings_dict
    marker = tmp_path / "writing"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.crash_updater",
            str(cluster.pk),
            NOON.isoformat(),
            str(marker),
        ],
        cwd=ROOT,
        env={
            **os.environ,
            "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:"
            f"{db['PORT'] or 5432}/{db['NAME']}",
            "SECRET_KEY": "integration-test-only",
            **FLEET,
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                output = process.communicate(timeout=5)[0].decode(errors="replace")
                pytest.fail(f"the updater never reached a write:\n{output}")
            time.sleep(0.2)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signal.SIGKILL
    # What the crash left: its lease, and a change "applying" that was never written.
    lock = UpdaterLock.objects.get(cluster=cluster)
    assert f":{marker.read_text()}:" in lock.holder
    leftover = ResizeChange.objects.get(workload__cluster=cluster, status=S.APPLYING)
    assert leftover.written_at is None and leftover.attempts == 1

    # The next cycle, a second later (well within one interval): the dead process's
    # lease is taken over (logged), the pod is read, the change approved again and
    # applied.
    caplog.set_level(logging.INFO)
    report = run_cycle(cluster, now=NOON + timedelta(seconds=1), holder="successor")
    assert not report.not_leader
    assert report.recovered == 1
    assert any("taken over" in r.getMessage() for r in caplog.records)
    leftover.refresh_from_db()
    assert leftover.attempts == 2 and leftover.written_at is not None
    assert leftover.status in (S.APPLYING, S.APPLIED)


@pytest.mark.django_db
def test_a_graceful_stop_releases_the_lease(fleet, monkeypatch):
    # The embedded default: the scheduler's tasks run in this process.
    monkeypatch.setitem(app.conf, "task_always_eager", True)
    monkeypatch.setitem(app.conf, "task_eager_propagates", True)
    cluster = _acting_cluster("sim-stop")
    run_periodic(stop=threading.Event(), interval_s=0.0, max_cycles=1)
    lock = UpdaterLock.objects.get(cluster=cluster)
    assert lock.holder == "" and lock.expires_at is not None
    # Another process leads at once, and the overview says since when nobody did.
    now = lock.expires_at + timedelta(seconds=1)
    assert control.leaderless_clusters(now=now) == [("sim-stop", lock.expires_at)]
    assert control.acquire_lock(cluster_id=cluster.pk, holder="next", now=now)
    assert control.leaderless_clusters(now=now) == []


@pytest.mark.django_db
def test_a_lease_expires_one_interval_after_its_holders_last_cycle(fleet, caplog):
    cluster = make_cluster("elsewhere")
    # A holder on another machine: its process cannot be checked.
    assert control.acquire_lock(
        cluster_id=cluster.pk, holder="other-host:1:abcd1234", now=NOON
    )
    almost = NOON + timedelta(seconds=59)
    assert not control.acquire_lock(cluster_id=cluster.pk, holder="me", now=almost)
    caplog.set_level(logging.INFO)
    after = NOON + timedelta(seconds=61)
    assert control.acquire_lock(cluster_id=cluster.pk, holder="me", now=after)
    assert any(
        "taken over by me from other-host:1:abcd1234" in r.getMessage()
        for r in caplog.records
    )
