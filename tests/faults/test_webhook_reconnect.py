"""PostgreSQL restarted under a real `webhook serve` process: its background thread
reconnects by itself, so a workload switched to Off stops being patched within one
reload interval of the database's return; and while it cannot reach the database for
longer than a cache may be used, its liveness fails, so the kubelet restarts it."""

from __future__ import annotations

import json
import time

import pytest
from django.db import connection
from django.utils import timezone

from recommender.models import Cluster
from recommender.services.policy.changes import update_policy
from tests.faults.conftest import poll
from tests.faults.webhook_process import webhook_process
from tests.services.test_admission import MI, recorded, workload_with
from tests.test_webhook import certs

__all__ = ["certs"]  # a fixture, for pytest

pytestmark = pytest.mark.faults

RELOAD_S = 3
MAX_AGE_S = 12


def test_a_webhook_process_reconnects_after_a_restart_and_fails_liveness_without_one(
    own_postgres, own_redis, certs
):
    cluster = Cluster.objects.create(name="wire", kind="simulated")
    workload = workload_with(
        cluster, "hooked", "wire-hook", {"app": (250, 300 * MI), "side": (20, 32 * MI)}
    )
    review = json.dumps(recorded("a-replicaset-pod")).encode()
    env = {
        "VPAWEB_WEBHOOK_RELOAD_S": str(RELOAD_S),
        "VPAWEB_WEBHOOK_MAX_SNAPSHOT_AGE_S": str(MAX_AGE_S),
    }
    with webhook_process(
        cluster="wire", cert=certs.cert, key=certs.key, ca_cert=certs.ca_cert, env=env
    ) as server:
        assert "patch" in server.post(review)[1]["response"]
        # Past one reload: the background thread holds a connection it has used.
        time.sleep(RELOAD_S + 1)

        own_postgres.restart()
        connection.close()
        back_at = time.monotonic()
        update_policy(
            workload_id=workload.pk,
            changes={"mode": "Off"},
            actor=None,
            actor_label="fault suite",
            now=timezone.now(),
        )
        # The operator's Off holds within one reload interval (plus the background
        # thread's one-second tick and the reload itself).
        poll(
            lambda: "patch" not in server.post(review)[1]["response"],
            what="the Off switch to stop patching",
            timeout_s=RELOAD_S + 5,
        )
        off_after_s = time.monotonic() - back_at
        status, ready = server.get("/readyz")
        assert status == 200, ready
        assert ready["caches"]["wire"]["last_error"] == "", ready
        assert server.get("/healthz")[0] == 200

        # The database away for longer than a cache may be used: the process
        # cannot serve what operators decide, and says so to the kubelet.
        own_postgres.stop()
        stopped_at = time.monotonic()
        try:
            poll(
                lambda: server.get("/healthz")[0] == 503,
                what="/healthz to fail without a database",
                timeout_s=MAX_AGE_S + RELOAD_S + 10,
            )
            unhealthy_after_s = time.monotonic() - stopped_at
            status, health = server.get("/healthz")
            assert status == 503
            assert "OperationalError" in health["caches"]["wire"]["last_error"]
            # Pods are still admitted (unchanged) meanwhile.
            assert server.post(review)[1]["response"]["allowed"] is True
        finally:
            own_postgres.start()
            connection.close()
        poll(
            lambda: server.get("/healthz")[0] == 200,
            what="/healthz to recover with the database",
            timeout_s=RELOAD_S + 10,
        )
    print(
        f"webhook process: Off held {off_after_s:.1f} s after PostgreSQL's restart; "
        f"/healthz failed {unhealthy_after_s:.1f} s after its stop"
    )
