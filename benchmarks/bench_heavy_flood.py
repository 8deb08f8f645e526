"""One viewer floods compare-profiles from 16 tokens while the kubelet probes /healthz
(`make bench BENCH=heavy_flood`): prints the probes' p50, p99 and maximum, the flood's
statuses and the load average. Target: /healthz p99 <= 100 ms.

``flood`` and ``sim_namespace`` are what tests/faults/test_heavy_flood.py runs,
shorter."""
# Seeds a throw-away database (SQLite in a temporary VPAWEB_VAR_DIR, or PostgreSQL when
# DATABASE_URL is set) with a simulated cluster and one viewer owning 16 read tokens,
# starts the production web server (vpaweb/gunicorn_conf.py; WEB_CONCURRENCY 2 and
# GUNICORN_THREADS 8 unless set), and for BENCH_SECONDS (45) runs 32 threads posting
# compare-profiles over one namespace (days 7 to 14, each thread its token in turn)
# while GET /healthz is sent every 0.2 s on a fresh connection (a probe with no answer
# within 5 s counts as 5,000 ms). With ``BENCH_BUDGETS=open`` the person's budgets and
# request rate are raised so far that only the per-process share of heavy threads holds
# the flood back (as with many people).

from __future__ import annotations

import http.client
import json
import os
import statistics
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

from benchmarks.bench_slowloris import PROBE_TIMEOUT_S, probe, production_server

TOKENS = 16
THREADS = 32


@dataclass
class FloodResult:
    """What the flood got and what the probes saw meanwhile."""

    probe_ms: list[float] = field(default_factory=list)
    probe_failures: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    busy_codes: set[str] = field(default_factory=set)


def sim_namespace(name: str) -> tuple[str, str]:
    """A simulated cluster row named ``name`` and a namespace of it with history:
    (cluster, namespace)."""
    from recommender.models import Cluster
    from recommender.services.connections import cluster_adapter_for

    cluster = Cluster.objects.create(name=name, kind=Cluster.Kind.SIMULATED)
    snapshot = cluster_adapter_for(cluster).discover()
    workload = next(w for w in snapshot.workloads if w.pods)
    return name, workload.namespace


def _compare(port: int, key: str, path: str, days: int) -> tuple[int, str]:
    body = json.dumps(
        {"profile_a": "vpa", "profile_b": "adaptive-margin", "days": days}
    )
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request(
            "POST",
            path,
            body=body,
            headers={
                "Authorization": f"Bearer {key}",
                "Content-Type": "application/json",
            },
        )
        response = connection.getresponse()
        content = response.read()
        code = ""
        if response.status >= 400:
            try:
                code = json.loads(content)["error"]["code"]
            except (ValueError, KeyError, TypeError):
                code = "?"
        return response.status, code
    except OSError:
        return 0, "no answer"
    finally:
        connection.close()


def flood(
    port: int,
    keys: list[str],
    *,
    cluster: str,
    namespace: str,
    threads: int = THREADS,
    seconds: float = 45.0,
) -> FloodResult:
    """``threads`` clients posting compare-profiles with ``keys`` in turn for
    ``seconds`` while /healthz is probed every 0.2 s."""
    path = f"/api/v1/clusters/{cluster}/namespaces/{namespace}/compare-profiles"
    result = FloodResult()
    lock = threading.Lock()
    stop = threading.Event()

    def client(index: int) -> None:
        turn = index
        while not stop.is_set():
            status, code = _compare(
                port, keys[turn % len(keys)], path, days=7 + turn % 8
            )
            turn += 1
            with lock:
                result.statuses[status] += 1
                if status == 503:
                    result.busy_codes.add(code)
            if status != 200:
                stop.wait(0.05)

    workers = [
        threading.Thread(target=client, args=(index,), daemon=True)
        for index in range(threads)
    ]
    for worker in workers:
        worker.start()
    ends = time.monotonic() + seconds
    time.sleep(min(2.0, seconds / 4))  # the flood under way
    while time.monotonic() < ends:
        status, ms = probe(port)
        if status != 200:
            result.probe_failures += 1
            ms = max(ms, PROBE_TIMEOUT_S * 1000)
        result.probe_ms.append(ms)
        time.sleep(0.2)
    stop.set()
    for worker in workers:
        worker.join(timeout=90)
    return result


def _loadavg() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> None:
    """Seed, serve, flood, print."""
    from benchmarks.bench_dashboard import _setup_django

    _setup_django()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from recommender.roles import Role, grant_role
    from recommender.services.access.tokens import create_token

    settings.API_TOKENS_PER_USER = TOKENS
    # Names of this run's own: a PostgreSQL database may hold an earlier run's.
    run = uuid.uuid4().hex[:8]
    viewer = get_user_model().objects.create_user(f"flood-{run}", password=None)
    grant_role(viewer, Role.VIEWER)
    keys = [
        create_token(
            name=f"flood-{run}-{index}",
            scope="read",
            created_by=viewer,
            now=timezone.now(),
        )[1]
        for index in range(TOKENS)
    ]
    cluster, namespace = sim_namespace(f"sim-flood-{run}")
    seconds = float(os.environ.get("BENCH_SECONDS", "45"))
    env = {
        "WEB_CONCURRENCY": os.environ.get("WEB_CONCURRENCY", "2"),
        "GUNICORN_THREADS": os.environ.get("GUNICORN_THREADS", "8"),
        "VPAWEB_VAR_DIR": os.environ.get("VPAWEB_VAR_DIR", ""),
    }
    if os.environ.get("BENCH_BUDGETS") == "open":
        env.update(
            VPAWEB_HEAVY_JOBS_RUNNING="64",
            VPAWEB_HEAVY_JOBS_PER_MINUTE="10000",
            VPAWEB_API_RATE="100000/min",
        )
    env = {name: value for name, value in env.items() if value}
    before = _loadavg()
    with production_server(**env) as port:
        result = flood(
            port, keys, cluster=cluster, namespace=namespace, seconds=seconds
        )
    after = _loadavg()
    probes = sorted(result.probe_ms)
    p99 = probes[min(len(probes) - 1, round(0.99 * (len(probes) - 1)))]
    print(
        f"/healthz under {THREADS} threads x {TOKENS} tokens of one viewer, "
        f"{seconds:g} s, budgets {os.environ.get('BENCH_BUDGETS', 'default')}: "
        f"{len(probes)} probes, {result.probe_failures} without an answer; "
        f"p50 {statistics.median(probes):.1f} ms, p99 {p99:.1f} ms, "
        f"max {probes[-1]:.1f} ms",
        flush=True,
    )
    print(
        f"flood statuses {dict(sorted(result.statuses.items()))}, "
        f"503 codes {sorted(result.busy_codes)}; load average before {before}, "
        f"after {after}",
        flush=True,
    )
