"""Slowloris against the production server: `make bench BENCH=slowloris`.

Starts `gunicorn -c vpaweb/gunicorn_conf.py vpaweb.wsgi:application` on a free
loopback port (WEB_CONCURRENCY 5 unless set, the rest gunicorn_conf's defaults), opens
10 connections that each send a request head one header line every 5 s (and reconnect
when the server drops them, as an attacker would), and meanwhile asks GET /healthz
every 0.2 s on a fresh connection for 45 s. Prints the probes' p50, p99 and maximum
(a probe with no answer within 5 s counts as 5,000 ms) with the load average.

``run_slowloris`` is also what tests/test_slowloris.py runs, shorter.
"""

from __future__ import annotations

import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE_TIMEOUT_S = 5.0


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def probe(port: int, path: str = "/healthz") -> tuple[int, float]:
    """(status, milliseconds) of one GET on a fresh connection; status 0 if none."""
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=PROBE_TIMEOUT_S)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        status = response.status
    except OSError:
        status = 0
    finally:
        connection.close()
    return status, (time.perf_counter() - started) * 1000


@contextmanager
def production_server(**env: str) -> Iterator[int]:
    """gunicorn with vpaweb/gunicorn_conf.py on a free port; yields the port."""
    port = free_port()
    with tempfile.TemporaryDirectory() as var:
        full_env = {
            **os.environ,
            "GUNICORN_BIND": f"127.0.0.1:{port}",
            "ALLOWED_HOSTS": "127.0.0.1",
            "DEBUG": "false",
            "SECRET_KEY": os.environ.get("SECRET_KEY") or "slowloris-bench-only-key",
            "VPAWEB_VAR_DIR": var,
            "WEB_CONCURRENCY": os.environ.get("WEB_CONCURRENCY", "5"),
            "LOG_LEVEL": "WARNING",
            **env,
        }
        server = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("gunicorn")),
                "-c",
                "vpaweb/gunicorn_conf.py",
                "--access-logfile",
                "/dev/null",
                "vpaweb.wsgi:application",
            ],
            cwd=ROOT,
            env=full_env,
        )
        try:
            deadline = time.monotonic() + 60
            while probe(port)[0] != 200:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("gunicorn did not start")
                time.sleep(0.2)
            yield port
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def _slow_client(port: int, every_s: float, stop: threading.Event) -> None:
    """One slowloris connection: a header line every ``every_s``, never the end."""
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
                conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                line = 0
                while not stop.wait(every_s):
                    line += 1
                    conn.sendall(b"X-Slow-%d: 1\r\n" % line)
        except OSError:
            stop.wait(0.1)  # dropped by the server: connect again


def run_slowloris(
    port: int,
    *,
    connections: int = 10,
    every_s: float = 5.0,
    duration_s: float = 45.0,
    probe_every_s: float = 0.2,
) -> list[tuple[int, float]]:
    """Hold ``connections`` slow clients for ``duration_s`` while probing /healthz;
    returns the probes. Every thread stops by itself."""
    stop = threading.Event()
    clients = [
        threading.Thread(target=_slow_client, args=(port, every_s, stop), daemon=True)
        for _ in range(connections)
    ]
    for client in clients:
        client.start()
    time.sleep(min(1.0, duration_s / 4))  # every slow connection is open first
    probes = []
    ends_at = time.monotonic() + duration_s
    try:
        while time.monotonic() < ends_at:
            probes.append(probe(port))
            time.sleep(probe_every_s)
    finally:
        stop.set()
        for client in clients:
            client.join(timeout=every_s + 10)
    return probes


def main() -> None:
    """Serve, attack, print the probes' latency with the load average."""
    with production_server() as port:
        load_before = os.getloadavg()
        probes = run_slowloris(port)
        load_after = os.getloadavg()
    times = sorted(
        ms if status == 200 else PROBE_TIMEOUT_S * 1000 for status, ms in probes
    )
    failed = sum(1 for status, _ in probes if status != 200)
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    print(
        f"/healthz under 10 slowloris connections for 45 s: {len(probes)} probes, "
        f"{failed} without a 200, p50 {statistics.median(times):.1f} ms, "
        f"p99 {p99:.1f} ms, max {times[-1]:.1f} ms"
    )
    before = " ".join(f"{x:.2f}" for x in load_before)
    after = " ".join(f"{x:.2f}" for x in load_after)
    print(f"load average before {before}, after {after}")
