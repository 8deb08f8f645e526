"""The webhook's database stopped: pods are still patched from the cache it holds,
``/healthz`` says the cache could not be reloaded, the decisions counted meanwhile
are kept in memory and stored once the database is back, and the cache reloads."""

from __future__ import annotations

import json
import time

import pytest
from django.db import connection

from recommender.models import Cluster
from recommender.services.admission import counters
from recommender.services.admission.decision import PATCHED
from recommender.services.admission.snapshot import forget_holders
from recommender.webhook import start_webhook_server, stop_webhook_server
from tests.faults.conftest import poll
from tests.services.test_admission import MI, recorded, workload_with
from tests.test_webhook import certs, client, post, saved_counts

__all__ = ["certs"]  # a fixture, for pytest

pytestmark = pytest.mark.faults


def health(server, certs) -> tuple[int, dict]:
    conn = client(server, certs)
    conn.request("GET", "/readyz")  # readiness names each cache
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def test_the_webhook_patches_from_its_cache_while_its_database_is_away(
    own_postgres, certs
):
    forget_holders()
    counters.flush_counts()
    cluster = Cluster.objects.create(name="wire", kind="simulated")
    workload_with(
        cluster, "hooked", "wire-hook", {"app": (250, 300 * MI), "side": (20, 32 * MI)}
    )
    server, stop, threads = start_webhook_server(
        host="127.0.0.1",
        port=0,
        cert=certs.cert,
        key=certs.key,
        default_cluster="wire",
        deadline_s=0.3,
    )
    review = json.dumps(recorded("a-replicaset-pod")).encode()
    holder = server.app.holders()[0]
    try:
        assert "patch" in post(client(server, certs), review)[1]["response"]

        own_postgres.stop()
        stopped_at = time.monotonic()
        holder.invalidate()  # reload now: the background thread tries every second
        poll(lambda: holder.last_error, what="the failed reload", timeout_s=10)

        # What the API server sees: the pod patched from the cache, in time.
        tick = time.monotonic()
        status, answer = post(client(server, certs), review)
        assert status == 200
        assert answer["response"]["allowed"] is True
        assert "patch" in answer["response"]
        assert time.monotonic() - tick < 1.0
        # What an operator sees: still serving, the reload error named.
        status, body = health(server, certs)
        assert status == 200
        assert body["caches"]["wire"]["loaded"] is True
        assert "OperationalError" in body["caches"]["wire"]["last_error"], body
        # The count of that decision cannot be stored now: it is kept for later.
        assert counters.flush_counts() == 0

        own_postgres.start()
        connection.close()
        holder.invalidate()
        poll(
            lambda: holder.last_error == "" and not holder._stale,
            what="the cache to reload after the database returned",
            timeout_s=30,
        )
        recovered_s = time.monotonic() - stopped_at
        assert "patch" in post(client(server, certs), review)[1]["response"]
        assert health(server, certs)[1]["caches"]["wire"]["last_error"] == ""
        # Every decision counted once: none lost while away, none doubled.
        assert saved_counts() == {PATCHED: 3}
        print(f"webhook database away: reloaded {recovered_s:.1f} s after the stop")
    finally:
        stop_webhook_server(server, stop, threads)
        forget_holders()
        # The stopped background thread's connection, so the test database can go.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
