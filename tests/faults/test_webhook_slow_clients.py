"""Slow bodies and many connections against a real `webhook serve` process: slow
clients are dropped at the read deadline, connections past the cap are closed at
accept, bodies over the limit get a 413 in the error shape (not a reset), the
kubelet's probe and the API server's reviews are answered throughout, and garbage
bodies are not counted as pods failing open."""

from __future__ import annotations

import json
import select
import socket
import ssl
import threading
import time

import pytest
from django.db.models import Sum

from recommender.models import AdmissionCount, Cluster
from recommender.services.admission.review import MAX_BODY_BYTES
from tests.faults.webhook_process import WebhookProcess, webhook_process
from tests.services.test_admission import MI, recorded, workload_with
from tests.test_webhook import certs

__all__ = ["certs"]  # a fixture, for pytest

pytestmark = pytest.mark.faults

DEADLINE_S = 2.0
MAX_CONNECTIONS = 64
ENV = {
    "VPAWEB_WEBHOOK_READ_DEADLINE_S": str(DEADLINE_S),
    "VPAWEB_WEBHOOK_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
    "VPAWEB_WEBHOOK_MAX_BUFFERED_MIB": "16",
    "VPAWEB_METRICS_TOKEN": "faults-metrics-token",
}
HEAD = (
    b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n"
)


def tls_socket(server: WebhookProcess) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(server.ca_cert))
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    return context.wrap_socket(raw, server_hostname="localhost")


def is_closed_by_server(sock: socket.socket, *, within_s: float) -> bool:
    """Whether the server ends the connection (or answers) within ``within_s``."""
    ends_at = time.monotonic() + within_s
    while (left_s := ends_at - time.monotonic()) > 0:
        if not select.select([sock], [], [], left_s)[0]:
            return False
        sock.settimeout(0.05)
        try:
            sock.recv(65536)
        except TimeoutError:
            continue  # a TLS record without data (a TLS 1.3 session ticket)
        except OSError:
            return True
        finally:
            sock.settimeout(5)
        return True
    return False


def slow_body(server: WebhookProcess, *, every_s: float = 0.2) -> float:
    """Declare a body of 5 MiB less a byte and send it 1 KiB at a time; the seconds
    until the server answers or drops the connection (60 s at most)."""
    started = time.monotonic()
    with tls_socket(server) as tls:
        tls.sendall(HEAD % (MAX_BODY_BYTES - 1))
        while time.monotonic() - started < 60:
            try:
                tls.sendall(b" " * 1024)
            except OSError:
                break
            if is_closed_by_server(tls, within_s=every_s):
                break
    return time.monotonic() - started


def failed_open() -> int:
    """Pods counted as failed open, as the overview adds them up."""
    rows = AdmissionCount.objects.filter(outcome=AdmissionCount.Outcome.FAILED_OPEN)
    return rows.aggregate(n=Sum("count"))["n"] or 0


def refused(server: WebhookProcess) -> dict[str, float]:
    conn = server.connect()
    conn.request(
        "GET", "/metrics", headers={"Authorization": "Bearer faults-metrics-token"}
    )
    text = conn.getresponse().read().decode()
    conn.close()
    counts = {}
    for line in text.splitlines():
        if line.startswith("vpaweb_webhook_refused_total{"):
            labels, value = line.rsplit(" ", 1)
            counts[labels.split('reason="')[1].split('"')[0]] = float(value)
    return counts


def test_slow_clients_and_many_connections_cannot_take_the_webhook(
    transactional_db, certs
):
    cluster = Cluster.objects.create(name="wire", kind="simulated")
    workload_with(cluster, "hooked", "wire-hook", {"app": (250, 300 * MI)})
    review = json.dumps(recorded("a-replicaset-pod")).encode()
    with webhook_process(
        cluster="wire", cert=certs.cert, key=certs.key, ca_cert=certs.ca_cert, env=ENV
    ) as server:
        # One slow body: dropped at the read deadline, not after a minute per read.
        assert slow_body(server) < DEADLINE_S + 2

        # 40 slow bodies at once, reconnecting when dropped, for three deadlines:
        # the probe and a pod's review are answered all along.
        stop = threading.Event()

        def attack() -> None:
            while not stop.is_set():
                try:
                    slow_body(server)
                except OSError:
                    time.sleep(0.1)

        attackers = [threading.Thread(target=attack, daemon=True) for _ in range(40)]
        for thread in attackers:
            thread.start()
        time.sleep(1)
        probes, reviews = [], []
        ends_at = time.monotonic() + 3 * DEADLINE_S
        while time.monotonic() < ends_at:
            probes.append(server.get("/healthz")[0])
            status, answer = server.post(review)
            reviews.append(status == 200 and "patch" in answer["response"])
            time.sleep(0.2)
        stop.set()
        for thread in attackers:
            thread.join(timeout=DEADLINE_S + 5)
        assert probes and set(probes) == {200}, probes
        assert reviews and all(reviews), reviews
        counts = refused(server)
        # Past the buffered budget at once (503), or dropped at the deadline.
        assert counts.get("busy", 0) > 0, counts
        assert counts.get("slow", 0) > 0, counts

        # Connections past the cap are closed at accept; all are dropped by the
        # deadline when they never finish a handshake.
        idle = [
            socket.create_connection(("127.0.0.1", server.port), timeout=5)
            for _ in range(MAX_CONNECTIONS + 10)
        ]
        try:
            time.sleep(DEADLINE_S / 4)
            closed_at_once = select.select(idle, [], [], 0)[0]
            assert len(closed_at_once) >= 10
            assert all(is_closed_by_server(s, within_s=DEADLINE_S + 2) for s in idle)
        finally:
            for s in idle:
                s.close()
        assert refused(server).get("connections", 0) >= 10
        assert server.get("/healthz")[0] == 200

        # A body over the limit, sent whole by a client that reads after writing:
        # the 413 in the error shape, not a reset.
        conn = server.connect(timeout_s=30)
        conn.request(
            "POST",
            "/mutate",
            body=b" " * (20 * 1024 * 1024),
            headers={"Content-Type": "application/json"},
        )
        response = conn.getresponse()
        error = json.loads(response.read())["error"]
        conn.close()
        assert (response.status, error["code"]) == (413, "too_large")
        assert error["fields"] == {"body": [error["message"]]}
        # The same announced with Expect: 100-continue: refused before it is sent.
        with tls_socket(server) as tls:
            tls.sendall(
                (HEAD % (20 * 1024 * 1024))[:-2] + b"Expect: 100-continue\r\n\r\n"
            )
            assert tls.recv(65536).startswith(b"HTTP/1.1 413")

        # Garbage anyone can post is refused and not counted as pods failing open.
        before = failed_open()
        conn = server.connect()
        for _ in range(200):
            conn.request(
                "POST", "/mutate", body=b"{garbage", headers={"Content-Type": "x"}
            )
            response = conn.getresponse()
            response.read()
            assert response.status == 400
        conn.close()
        assert refused(server).get("malformed", 0) >= 200
    # The process flushed its counts when it stopped.
    assert failed_open() == before
