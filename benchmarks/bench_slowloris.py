"""Slow and hostile clients against the production servers (`make bench
BENCH=slowloris`): ``BENCH_TARGETS`` picks the targets (comma-separated, default every
one of ``TARGETS``), each a function printing its figures with the load average.

``run_slowloris`` is also what tests/test_slowloris.py runs, shorter.
"""
# - ``web``: `gunicorn -c vpaweb/gunicorn_conf.py vpaweb.wsgi:application` on a free
#   loopback port (WEB_CONCURRENCY 5 unless set, the rest gunicorn_conf's defaults), 10
#   connections that each send a request head one header line every 5 s (and reconnect
#   when the server drops them, as an attacker would), and meanwhile GET /healthz every
#   0.2 s on a fresh connection for 45 s. Prints the probes' p50, p99 and maximum (a
#   probe with no answer within 5 s counts as 5,000 ms).
# - ``webhook``: `manage.py webhook serve` as deployed (its own process, TLS, a
#   throw-away SQLite database of ``BENCH_WORKLOADS`` workloads, default 1,000), and
#   ``BENCH_ATTACKERS`` (80) TLS connections that each declare a body of 5 MiB less a
#   byte, send all of it but the last byte as fast as they can and hold, reconnecting
#   half a second after the server answers or drops them (in a process of their own at
#   the lowest CPU priority); meanwhile GET /healthz over TLS on a fresh connection
#   every 0.2 s (the kubelet's probe) and a pod's review every 0.2 s, for
#   ``BENCH_SECONDS`` (45). Prints the server process's resident memory before, its
#   peak (VmHWM), the probes' p50/p99/max (and the same probe's before the attack),
#   the reviews answered, and the server's own count of what it refused. Targets: peak
#   RSS <= 256 MiB, /healthz p99 <= 100 ms.

from __future__ import annotations

import http.client
import multiprocessing
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


def web_slowloris() -> None:
    """gunicorn under 10 slowloris connections: the probes' latency."""
    with production_server() as port:
        load_before = os.getloadavg()
        probes = run_slowloris(port)
        load_after = os.getloadavg()
    p50, p99, worst, failed = _percentiles(probes)
    print(
        f"/healthz under 10 slowloris connections for 45 s: {len(probes)} probes, "
        f"{failed} without a 200, p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
        f"max {worst:.1f} ms"
    )
    _print_load(load_before, load_after)


def _percentiles(probes: list[tuple[int, float]]) -> tuple[float, float, float, int]:
    """p50, p99, max (ms; no 200 within the timeout counts as the timeout) and how
    many probes had no 200."""
    times = sorted(
        ms if status == 200 else PROBE_TIMEOUT_S * 1000 for status, ms in probes
    )
    failed = sum(1 for status, _ in probes if status != 200)
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    return statistics.median(times), p99, times[-1], failed


def _print_load(before: tuple[float, ...], after: tuple[float, ...]) -> None:
    print(
        f"load average before {' '.join(f'{x:.2f}' for x in before)}, after "
        f"{' '.join(f'{x:.2f}' for x in after)} ({os.cpu_count()} cores)"
    )


# --- the webhook --------------------------------------------------------------------

WEBHOOK_BODY_BYTES = 5 * 1024 * 1024 - 1
METRICS_TOKEN = "slowloris-bench-token"


@contextmanager
def webhook_server(workloads: int) -> Iterator[tuple[int, int, Path]]:
    """`manage.py webhook serve` over a throw-away SQLite database of ``workloads``
    workloads; yields (port, pid, CA file) once /readyz answers 200."""
    from benchmarks import bench_webhook

    os.environ.pop("DATABASE_URL", None)
    bench_webhook._setup_django()  # SQLite in a new temporary VPAWEB_VAR_DIR
    var = os.environ["VPAWEB_VAR_DIR"]
    bench_webhook._seed(workloads)
    from django.db import connections

    from recommender.services.admission.certs import create_certificates

    connections.close_all()
    certs = create_certificates(
        directory=Path(var) / "certs", dns_names=["localhost"], ip_addresses=[]
    )
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "webhook",
            "serve",
            "--host",
            "127.0.0.1",
            f"--port={port}",
            f"--cert={certs.cert}",
            f"--key={certs.key}",
            "--cluster=bench",
        ],
        cwd=ROOT,
        env={
            **os.environ,
            "VPAWEB_VAR_DIR": var,
            "VPAWEB_METRICS_TOKEN": METRICS_TOKEN,
            "LOG_LEVEL": "WARNING",
        },
    )
    try:
        deadline = time.monotonic() + 120
        while _tls_get(port, certs.ca_cert, "/readyz")[0] != 200:
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("webhook serve did not start")
            time.sleep(0.2)
        yield port, server.pid, certs.ca_cert
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _tls_context(ca: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))


def _tls_get(
    port: int, ca: Path, path: str, headers: dict[str, str] | None = None
) -> tuple[int, float, bytes]:
    """(status, milliseconds, body) of one GET on a fresh TLS connection; status 0
    when no answer came within the probe's timeout."""
    started = time.perf_counter()
    connection = http.client.HTTPSConnection(
        "localhost", port, context=_tls_context(ca), timeout=PROBE_TIMEOUT_S
    )
    body = b""
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        body = response.read()
        status = response.status
    except OSError:
        status = 0
    finally:
        connection.close()
    return status, (time.perf_counter() - started) * 1000, body


def _review_body() -> bytes:
    """The recorded ReplicaSet pod's review, owned by a workload of the bench fleet."""
    from benchmarks import bench_webhook

    ((_uid, body),) = bench_webhook._bodies(
        [("team-8", "Deployment", "service-00008")], 1
    )
    return body


def _post_review(port: int, ca: Path, body: bytes) -> int:
    connection = http.client.HTTPSConnection(
        "localhost", port, context=_tls_context(ca), timeout=PROBE_TIMEOUT_S
    )
    try:
        connection.request(
            "POST", "/mutate", body=body, headers={"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        response.read()
        return response.status
    except OSError:
        return 0
    finally:
        connection.close()


def _hold_a_large_body(port: int, ca: Path, stop: Any) -> None:
    """One attacker: declare 5 MiB less a byte, send all but the last byte, hold;
    again half a second after the server answers or drops the connection."""
    head = (
        b"POST /mutate HTTP/1.1\r\nHost: localhost\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
        % WEBHOOK_BODY_BYTES
    )
    chunk = b" " * 65536
    while not stop.is_set():
        try:
            raw = socket.create_connection(("127.0.0.1", port), timeout=10)
            with _tls_context(ca).wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(head)
                left = WEBHOOK_BODY_BYTES - 1
                while left > 0 and not stop.is_set():
                    tls.sendall(chunk[: min(left, len(chunk))])
                    left -= min(left, len(chunk))
                while not stop.is_set() and not tls.recv(65536):
                    pass  # an answer or the end: the server let go
        except OSError:
            pass
        stop.wait(0.5)


def _attack(port: int, ca: Path, attackers: int, stop: Any) -> None:
    """``attackers`` threads holding large bodies until ``stop`` is set, at the
    lowest CPU priority: a real attacker sends from other machines, so its own work
    should not be what slows the server and the probes here."""
    os.nice(19)
    threads = [
        threading.Thread(target=_hold_a_large_body, args=(port, ca, stop), daemon=True)
        for _ in range(attackers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)


def _cpu_s(pid: int) -> float:
    """User and system CPU seconds a process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_rss_mib(pid: int) -> tuple[float, float]:
    """(resident now, peak resident) of a process, MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


def _refused(port: int, ca: Path) -> dict[str, int]:
    """The server's vpaweb_webhook_refused_total by reason."""
    _status, _ms, text = _tls_get(
        port, ca, "/metrics", {"Authorization": f"Bearer {METRICS_TOKEN}"}
    )
    counts = {}
    for line in text.decode().splitlines():
        if line.startswith("vpaweb_webhook_refused_total{"):
            labels, value = line.rsplit(" ", 1)
            counts[labels.split('reason="')[1].split('"')[0]] = int(float(value))
    return counts


def webhook_slowloris() -> None:
    """`webhook serve` under slow 5 MiB bodies: its memory, its probe's latency."""
    workloads = int(os.environ.get("BENCH_WORKLOADS", "1000"))
    attackers = int(os.environ.get("BENCH_ATTACKERS", "80"))
    seconds = float(os.environ.get("BENCH_SECONDS", "45"))
    with webhook_server(workloads) as (port, pid, ca):
        review = _review_body()
        # The probe's latency on this machine, at its load now, without the attack.
        quiet = []
        for _ in range(50):
            quiet.append(_tls_get(port, ca, "/healthz")[:2])
            time.sleep(0.2)
        rss_before, _ = _peak_rss_mib(pid)
        cpu_before = _cpu_s(pid)
        load_before = os.getloadavg()
        # The attackers in a process of their own: their threads do not take this
        # one's interpreter from the probes.
        stop = multiprocessing.get_context("fork").Event()
        attack = multiprocessing.get_context("fork").Process(
            target=_attack, args=(port, ca, attackers, stop)
        )
        attack.start()
        time.sleep(2)  # every attacker has connected once
        probes, reviews = [], []
        rss_seen = rss_before
        ends_at = time.monotonic() + seconds
        try:
            while time.monotonic() < ends_at:
                status, ms, _ = _tls_get(port, ca, "/healthz")
                probes.append((status, ms))
                reviews.append(_post_review(port, ca, review))
                rss_seen = max(rss_seen, _peak_rss_mib(pid)[0])
                time.sleep(0.2)
        finally:
            stop.set()
            attack.join(timeout=30)
        load_after = os.getloadavg()
        cpu_s = _cpu_s(pid) - cpu_before
        _, rss_peak = _peak_rss_mib(pid)
        refused = _refused(port, ca)
    p50, p99, worst, failed = _percentiles(probes)
    quiet_p50, quiet_p99, quiet_worst, _ = _percentiles(quiet)
    print(
        f"webhook serve ({workloads} workloads) under {attackers} connections holding "
        f"5 MiB bodies for {seconds:g} s:"
    )
    print(
        f"  resident memory: {rss_before:.0f} MiB before, peak {rss_peak:.0f} MiB "
        f"(VmHWM; {rss_seen:.0f} MiB the highest sampled), target <= 256 MiB"
    )
    print(
        f"  /healthz: {len(probes)} probes, {failed} without a 200, p50 {p50:.1f} ms, "
        f"p99 {p99:.1f} ms, max {worst:.1f} ms, target p99 <= 100 ms"
    )
    print(
        f"  /healthz before the attack (this machine at its load): {len(quiet)} "
        f"probes, p50 {quiet_p50:.1f} ms, p99 {quiet_p99:.1f} ms, "
        f"max {quiet_worst:.1f} ms"
    )
    print(f"  server CPU: {cpu_s:.1f} s over the {seconds:g} s")
    answered = sum(1 for status in reviews if status == 200)
    print(f"  pods' reviews: {answered} of {len(reviews)} answered 200")
    print(
        "  refused by the server: "
        + (", ".join(f"{k} {v}" for k, v in sorted(refused.items())) or "nothing")
    )
    _print_load(load_before, load_after)


TARGETS = {"web": web_slowloris, "webhook": webhook_slowloris}


def main() -> None:
    """Run the targets ``BENCH_TARGETS`` names (default all)."""
    names = os.environ.get("BENCH_TARGETS", ",".join(TARGETS)).split(",")
    unknown = [name for name in names if name not in TARGETS]
    if unknown:
        raise SystemExit(f"BENCH_TARGETS: unknown {unknown}; have {list(TARGETS)}")
    for name in names:
        print(f"--- slowloris: {name}", flush=True)
        TARGETS[name]()
