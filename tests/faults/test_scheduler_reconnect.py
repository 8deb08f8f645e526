"""PostgreSQL restarted under a real `manage.py run_scheduler` (the embedded default's
loop, its tasks run in-process): the next cycle reconnects by itself and refreshes."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from django.db import connection

from recommender.models import Cluster, RefreshRun
from tests.faults.conftest import poll
from tests.faults.webhook_process import ROOT

pytestmark = pytest.mark.faults

INTERVAL_S = 5  # VPAWEB_REFRESH_INTERVAL_S's minimum


def test_the_scheduler_refreshes_again_after_a_postgresql_restart(own_postgres):
    cluster = Cluster.objects.create(name="sim-scheduled", kind=Cluster.Kind.SIMULATED)
    db = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/"
        f"{db['NAME']}",
        "REDIS_URL": "",  # the embedded default: the tasks run in this process
        "SECRET_KEY": "fault-suite-only-key",
        "VPAWEB_REFRESH_INTERVAL_S": str(INTERVAL_S),
        "VPAWEB_SIMULATION_WORKLOADS": "5",
        "VPAWEB_SIMULATION_HISTORY_DAYS": "1",
        "LOG_LEVEL": "WARNING",
    }
    process = subprocess.Popen(
        [sys.executable, "manage.py", "run_scheduler", "--interval", str(INTERVAL_S)],
        cwd=ROOT,
        env=env,
    )
    succeeded = RefreshRun.objects.filter(
        cluster=cluster, status=RefreshRun.Status.SUCCEEDED
    )
    try:
        poll(succeeded.exists, what="a first scheduled refresh", timeout_s=120)
        own_postgres.restart()
        connection.close()
        restarted_at = time.monotonic()
        last = poll(
            lambda: RefreshRun.objects.filter(cluster=cluster).order_by("pk").last(),
            what="the runs",
        )
        # A cycle started after the restart succeeds: within two intervals (the one
        # running at the restart may fail), plus the refresh itself.
        poll(
            lambda: succeeded.filter(pk__gt=last.pk).exists(),
            what="a refresh after the restart",
            timeout_s=3 * INTERVAL_S + 30,
        )
        recovered_s = time.monotonic() - restarted_at
        assert process.poll() is None
    finally:
        process.terminate()
        process.wait(timeout=60)
    print(f"run_scheduler: refreshed {recovered_s:.1f} s after PostgreSQL's restart")
