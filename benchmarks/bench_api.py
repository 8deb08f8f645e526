"""The API under load, served by gunicorn with the production configuration.

python -m benchmarks.bench_api    (or: make bench BENCH=api)"""
# Seeds a throw-away database (SQLite in a temporary VPAWEB_VAR_DIR, or PostgreSQL when
# DATABASE_URL is set) with BENCH_WORKLOADS workloads (default 1,000; the dashboard
# benchmark's fleet), starts `gunicorn -c vpaweb/gunicorn_conf.py
# vpaweb.wsgi:application` on a free local port (WEB_CONCURRENCY as set, else
# gunicorn_conf's default), and sends BENCH_REQUESTS requests (default 2,000) at
# concurrency BENCH_CONCURRENCY (default 8), one connection per request, to:
#
# - GET /api/v1/workloads/ (the default page of 100);
# - POST /api/v1/rightsize with one Deployment of a known workload (two containers).
#
# Prints requests/s, p50, p99 and errors of each (target: 0 errors, p99 <= 250 ms), then
# /healthz latency while a maximum-size rightsize request (VPAWEB_API_MAX_DOCUMENTS
# Deployments, VPAWEB_API_MAX_CONTAINERS containers) is being processed (target: < 50
# ms), and how long that request took. The per-token rate limit is raised for the run
# (VPAWEB_API_RATE), since 2,000 requests from one token is the point here.
#
# The client runs on the same machine and competes for its CPUs, so each load also
# prints the CPU time spent per request by the server (gunicorn's master and workers,
# from /proc, workers replaced during the run included), by a local PostgreSQL's
# backends for the bench database, and by the client (this process, the sampling thread
# of the database figure included), and the load average before and after: on a shared
# machine the latencies say more about the neighbours than about vpaweb, the CPU per
# request does not. The client is a pool of BENCH_CONCURRENCY threads, each sending one
# request at a time with the standard library's http.client, one connection per request
# (gunicorn's sync workers close the connection after each response): about a twentieth
# of the server's CPU per request for the workload list.

from __future__ import annotations

import http.client
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET_P99_MS = 250.0
TARGET_HEALTHZ_MS = 50.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _request(
    port: int, method: str, path: str, body: bytes | None, headers: dict[str, str]
) -> tuple[int, float, bytes]:
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
        status = response.status
    except OSError:
        status, data = 0, b""
    finally:
        connection.close()
    return status, (time.perf_counter() - started) * 1000, data


def _server_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of gunicorn's master, its live workers, and the
    workers it has reaped (the master's cutime/cstime)."""
    ticks = os.sysconf("SC_CLK_TCK")

    def fields(p: int | str) -> list[str]:
        try:
            text = Path(f"/proc/{p}/stat").read_text()
        except OSError:  # a worker that exited meanwhile: counted once reaped
            return []
        return text.rsplit(")", 1)[1].split()

    master = fields(pid)
    if not master:
        return 0.0
    total = sum(int(v) for v in master[11:15])
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = [
            p.name
            for p in Path("/proc").iterdir()
            if p.name.isdigit() and fields(p.name)[1:2] == [str(pid)]
        ]
    for child in children:
        total += sum(int(v) for v in fields(child)[11:13])
    return total / ticks


def _client_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _DatabaseCpu:
    """CPU seconds of the PostgreSQL backends serving the bench database, when the
    server runs on this machine (their /proc entries are readable): sampled every half
    second in a thread, so a backend that ends during the load keeps its last sample
    (CONN_MAX_AGE closes each worker's connection after a minute). None for SQLite (in
    the workers' own CPU) or a remote server."""

    def __init__(self) -> None:
        from django.db import connection

        self.samples: dict[int, tuple[float, float]] = {}
        self.enabled = connection.vendor == "postgresql"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        from django.db import connection

        ticks = os.sysconf("SC_CLK_TCK")
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid()"
            )
            pids = [row[0] for row in cursor.fetchall()]
        for pid in pids:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            cpu = (int(stat[11]) + int(stat[12])) / ticks
            first = self.samples.get(pid, (cpu, cpu))[0]
            self.samples[pid] = (first, cpu)

    def _run(self) -> None:
        from django.db import connection

        try:
            while True:
                self._sample()
                if self._stop.wait(0.5):
                    break
        finally:
            connection.close()

    def start(self) -> None:
        if self.enabled:
            self.samples.clear()
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()

    def stop(self) -> float | None:
        """CPU seconds used since start(), or None when not measured."""
        if self._thread is None:
            return None
        self._stop.set()
        self._thread.join()
        self._thread = None
        if not self.samples:
            return None
        return sum(last - first for first, last in self.samples.values())


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _load(
    name: str,
    total: int,
    concurrency: int,
    send: Callable[[], tuple[int, float, bytes]],
    server_pid: int,
) -> None:
    for _ in range(concurrency):
        send()  # warm-up: imports and first queries of the workers are not the load
    load_before = _loadavg()
    database = _DatabaseCpu()
    database.start()
    server_cpu, client_cpu = _server_cpu_s(server_pid), _client_cpu_s()
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(lambda _: send(), range(total)))
    elapsed = time.perf_counter() - started
    server_ms = (_server_cpu_s(server_pid) - server_cpu) * 1000 / total
    client_ms = (_client_cpu_s() - client_cpu) * 1000 / total
    database_s = database.stop()
    database_text = (
        "" if database_s is None else f", database {database_s * 1000 / total:.1f} ms"
    )
    times = sorted(ms for _, ms, _ in results)
    errors = sum(1 for status, _, _ in results if status != 200)
    p99 = times[int(len(times) * 0.99) - 1]
    verdict = "ok" if errors == 0 and p99 <= TARGET_P99_MS else "MISSED"
    p50 = statistics.median(times)
    print(
        f"{name:38} {total / elapsed:7.1f} req/s  p50 {p50:6.1f} ms"
        f"  p99 {p99:6.1f} ms  max {times[-1]:6.1f} ms  errors {errors}"
        f"  [{verdict}: 0 errors, p99 <= {TARGET_P99_MS:.0f} ms]",
        flush=True,
    )
    print(
        f"  CPU per request: server {server_ms:.1f} ms{database_text},"
        f" client {client_ms:.1f} ms;"
        f" load average {load_before} before, {_loadavg()} after",
        flush=True,
    )
    if errors:
        codes = sorted({status for status, _, _ in results if status != 200})
        print(f"  error statuses: {codes}", flush=True)


def _deployment(name: str, namespace: str, containers: list[str]) -> str:
    items = "".join(
        f"      - name: {c}\n        resources:\n"
        f"          requests: {{cpu: 500m, memory: 512Mi}}\n"
        f"          limits: {{cpu: '1', memory: 1Gi}}\n"
        for c in containers
    )
    return (
        "apiVersion: apps/v1\nkind: Deployment\n"
        f"metadata: {{name: {name}, namespace: {namespace}}}\n"
        f"spec:\n  template:\n    spec:\n      containers:\n{items}"
    )


def main() -> None:
    """Seed, serve with gunicorn, load, print."""
    from benchmarks.bench_dashboard import _seed, _setup_django

    _setup_django()
    from django.conf import settings
    from django.utils import timezone

    from recommender.models import Workload
    from recommender.services.access.tokens import create_token

    count = int(os.environ.get("BENCH_WORKLOADS", "1000"))
    total = int(os.environ.get("BENCH_REQUESTS", "2000"))
    concurrency = int(os.environ.get("BENCH_CONCURRENCY", "8"))
    seeded = time.perf_counter()
    _seed(count)
    _, key = create_token(
        name=f"bench-{os.getpid()}", scope="read", created_by=None, now=timezone.now()
    )
    print(
        f"seeded {count} workloads in {time.perf_counter() - seeded:.1f} s", flush=True
    )
    known = Workload.objects.filter(kind="Deployment").order_by("pk").first()
    assert known is not None
    sized = [c.name for c in known.containers.order_by("position")]

    port = _free_port()
    env = {
        **os.environ,
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "ALLOWED_HOSTS": "127.0.0.1",
        "DEBUG": "false",
        "VPAWEB_API_RATE": "1000000/min",
        "LOG_LEVEL": "WARNING",
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
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while _request(port, "GET", "/healthz", None, {})[0] != 200:
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("gunicorn did not start")
            time.sleep(0.2)
        workers = env.get("WEB_CONCURRENCY") or f"{2 * (os.cpu_count() or 1) + 1}"
        print(
            f"gunicorn on 127.0.0.1:{port}, {workers} workers x "
            f"{env.get('GUNICORN_THREADS', '8')} threads, "
            f"{total} requests at concurrency {concurrency}",
            flush=True,
        )
        auth = {"Authorization": f"Bearer {key}"}
        status, _, data = _request(port, "GET", "/api/v1/workloads/", None, auth)
        listed = json.loads(data)["count"] if status == 200 else "?"
        print(f"GET /api/v1/workloads/ lists {listed} workloads", flush=True)
        _load(
            "GET /api/v1/workloads/ (page of 100)",
            total,
            concurrency,
            lambda: _request(port, "GET", "/api/v1/workloads/", None, auth),
            server.pid,
        )
        body = _deployment(known.name, known.namespace, sized).encode()
        yaml_headers = {**auth, "Content-Type": "application/yaml"}
        _load(
            "POST /api/v1/rightsize (1 Deployment)",
            total,
            concurrency,
            lambda: _request(port, "POST", "/api/v1/rightsize", body, yaml_headers),
            server.pid,
        )
        _healthz_under_maximum(port, yaml_headers, settings)
    finally:
        server.terminate()
        server.wait(timeout=30)


def _healthz_under_maximum(port: int, headers: dict[str, str], settings: Any) -> None:
    documents = int(settings.API_MAX_DOCUMENTS)
    containers = int(settings.API_MAX_CONTAINERS)
    per_document = max(1, containers // documents)
    body = "---\n".join(
        _deployment(
            f"service-{i:05d}",
            f"team-{i % 40}",
            [f"c{j}" for j in range(per_document)],
        )
        for i in range(documents)
    ).encode()
    result: dict[str, tuple[int, float, bytes]] = {}

    def big() -> None:
        result["big"] = _request(port, "POST", "/api/v1/rightsize", body, headers)

    thread = threading.Thread(target=big)
    thread.start()
    probes = []
    while thread.is_alive():
        status, ms, _ = _request(port, "GET", "/healthz", None, {})
        probes.append((status, ms))
        time.sleep(0.01)
    thread.join()
    status, big_ms, data = result["big"]
    times = sorted(ms for _, ms in probes) or [0.0]
    bad = sum(1 for s, _ in probes if s != 200)
    summary = json.loads(data).get("summary", {}) if status == 200 else data[:200]
    print(
        f"maximum-size rightsize ({documents} documents, {documents * per_document} "
        f"containers, {len(body) / 1024:.0f} KiB): {status} in {big_ms:.0f} ms; "
        f"summary {summary}",
        flush=True,
    )
    verdict = "ok" if times[-1] < TARGET_HEALTHZ_MS and bad == 0 else "MISSED"
    print(
        f"/healthz meanwhile: {len(probes)} probes, p50 {statistics.median(times):.1f} "
        f"ms, max {times[-1]:.1f} ms, errors {bad}  [{verdict}: < "
        f"{TARGET_HEALTHZ_MS:.0f} ms]",
        flush=True,
    )


if __name__ == "__main__":
    main()
