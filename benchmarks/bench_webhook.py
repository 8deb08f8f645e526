"""The admission webhook under load: 200 reviews/s over HTTPS, 10,000 workloads.

python -m benchmarks.bench_webhook    (or: make bench BENCH=webhook)"""
# Seeds a throw-away database (SQLite in a temporary VPAWEB_VAR_DIR, or PostgreSQL when
# DATABASE_URL is set) with BENCH_WORKLOADS workloads (default 10,000) of one to three
# containers in 40 namespaces (a fifth of them in Initial or Recreate mode, each
# container with a recommendation of 8 days' history; LimitRanges in a quarter of the
# namespaces), makes a CA and serving certificate, and starts ``webhook serve``'s server
# in a separate process (as the API server would reach it). A client then sends
# BENCH_RATE reviews per second (default 200) for BENCH_SECONDS (default 30), open
# loop, over 8 keep-alive HTTPS connections (kube-apiserver keeps a pool of them): the
# recorded ReplicaSet pod review of tests/fixtures/k8s-wire/, each time with a new uid
# and owned by a random workload.
#
# Prints p50/p99/max of the round trip (send to full answer), the errors (anything but a
# 200 AdmissionReview echoing the uid and allowing the pod), and the server's own counts
# of patched / left alone / failed open. Target: p99 <= 10 ms, zero errors.
#
# BENCH_REFRESH_WORKLOADS=N (PostgreSQL and REDIS_URL, as deployed) also runs refresh
# cycles of a simulated cluster of N workloads (about 1.5 N containers) in a background
# process for the whole load, one after the other (first contact before the load
# starts): the webhook then shares the machine with a refresh, and each cycle tells it
# to reload its cache, as a deployed refresh does. The server's cache reloads during the
# load (count, wall and CPU time, workloads read again) are printed too. That refresh is
# of another cluster than the one served; BENCH_SERVED_CHANGES=N also gives N of the
# served cluster's Initial/Recreate workloads new recommendations before each cycle
# (journaled, as a refresh of the served cluster does), for the webhook to reload.
# BENCH_WEBHOOK_RELOADS=0 (diagnosis) keeps the server from reloading its cache.
# BENCH_WEBHOOK_PROCESSES=N serves with N processes on one port (SO_REUSEPORT, as
# ``webhook serve --processes N``).

from __future__ import annotations

import copy
import http.client
import json
import multiprocessing
import os
import queue
import random
import socket
import ssl
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

TARGET_P99_MS = 10.0
CONNECTIONS = 8
ROOT = Path(__file__).resolve().parents[1]
WIRE = ROOT / "tests" / "fixtures" / "k8s-wire" / "admission"


def _setup_django() -> None:
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")
    if not os.environ.get("DATABASE_URL"):
        os.environ["VPAWEB_VAR_DIR"] = tempfile.mkdtemp(prefix="vpaweb-bench-")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def _seed(workload_count: int) -> list[tuple[str, str, str]]:
    """Bulk-insert the fleet; return (namespace, kind, name) of every workload."""
    from django.utils import timezone

    from recommender.engine.capping import LimitRangeItem
    from recommender.engine.resources import Resources
    from recommender.models import (
        Cluster,
        Container,
        NamespaceLimitRange,
        Policy,
        Recommendation,
        Workload,
    )
    from recommender.services.advice.limits import item_to_dict

    now = timezone.now()
    mi = 2**20
    cluster = Cluster.objects.create(name="bench", kind="simulated")
    kinds = ["Deployment", "StatefulSet", "DaemonSet", "Deployment"]
    workloads = Workload.objects.bulk_create(
        [
            Workload(
                cluster=cluster,
                kind=kinds[i % 4],
                namespace=f"team-{i % 40}",
                name=f"service-{i:05d}",
                replicas=1 + i % 5,
            )
            for i in range(workload_count)
        ],
        batch_size=2000,
    )
    modes = ["Off"] * 8 + ["Initial", "Recreate"]
    Policy.objects.bulk_create(
        [Policy(workload=w, mode=modes[i % 10]) for i, w in enumerate(workloads)],
        batch_size=2000,
    )
    containers = Container.objects.bulk_create(
        [
            Container(
                workload=w,
                name=["app", "side", "proxy"][p],
                position=p,
                request_cpu_millicores=500,
                request_memory_bytes=512 * mi,
            )
            for i, w in enumerate(workloads)
            for p in range(1 + i % 3)
        ],
        batch_size=2000,
    )
    recs = Recommendation.objects.bulk_create(
        [
            Recommendation(
                container=c,
                created_at=now,
                target_cpu_millicores=100 + i % 400,
                target_memory_bytes=(64 + i % 256) * mi,
                lower_cpu_millicores=80,
                lower_memory_bytes=48 * mi,
                upper_cpu_millicores=900,
                upper_memory_bytes=900 * mi,
                uncapped_cpu_millicores=100 + i % 400,
                uncapped_memory_bytes=(64 + i % 256) * mi,
                # 8 days of history: past VPAWEB_MIN_HISTORY_HOURS, so the webhook
                # patches these pods (without it, every pod was left alone).
                confidence=8.0,
            )
            for i, c in enumerate(containers)
        ],
        batch_size=2000,
    )
    for container, rec in zip(containers, recs, strict=True):
        container.latest_recommendation = rec
    Container.objects.bulk_update(
        containers, ["latest_recommendation"], batch_size=2000
    )
    item = LimitRangeItem(
        type="Container",
        max=Resources(4000, 8192 * mi),
        default=Resources(1000, mi * 1024),
    )
    NamespaceLimitRange.objects.bulk_create(
        [
            NamespaceLimitRange(
                cluster=cluster,
                namespace=f"team-{n}",
                container_item=item_to_dict(item),
            )
            for n in range(0, 40, 4)
        ]
    )
    return [(w.namespace, w.kind, w.name) for w in workloads]


def _serve(
    cert: str, key: str, ready: Any, stop: Any, timings: Any, port: int = 0
) -> None:
    """The server process: ``webhook serve`` without the command-line wrapper; puts
    the time spent in ``WebhookApp.handle`` per request (ms) and the cache reloads'
    seconds on ``timings`` at the end."""
    from django.conf import settings

    from recommender.services.admission.snapshot import SnapshotHolder
    from recommender.webhook import (
        WebhookApp,
        start_webhook_server,
        stop_webhook_server,
    )

    spent: list[float] = []
    reloads: list[tuple[float, float, int | None, float]] = []
    handle = WebhookApp.handle
    refresh = SnapshotHolder.refresh

    def timed_refresh(self: SnapshotHolder, **kwargs: Any) -> Any:
        # Wall time, CPU time of the reloading thread, workloads read again (None:
        # the whole cache), and when it began (perf_counter is the system's monotonic
        # clock: comparable with the client's).
        began, cpu_began = time.perf_counter(), time.thread_time()
        snapshot = None
        try:
            snapshot = refresh(self, **kwargs)
            return snapshot
        finally:
            reloads.append(
                (
                    time.perf_counter() - began,
                    time.thread_time() - cpu_began,
                    getattr(snapshot, "reloaded", None),
                    began,
                )
            )

    SnapshotHolder.refresh = timed_refresh  # type: ignore[method-assign]

    def timed(self: WebhookApp, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return handle(self, **kwargs)
        finally:
            spent.append((time.perf_counter() - began) * 1000)

    WebhookApp.handle = timed  # type: ignore[method-assign]

    server, stop_event, threads = start_webhook_server(
        host="127.0.0.1",
        port=port,
        cert=Path(cert),
        key=Path(key),
        default_cluster="bench",
        deadline_s=settings.WEBHOOK_DEADLINE_S,
        reuse_port=bool(port),
    )
    reloads.clear()  # the first load, before the first request
    if os.environ.get("BENCH_WEBHOOK_RELOADS") == "0":
        # Diagnosis only: the cache is never reloaded during the load, so what is
        # left of the tail beside a refresh is the refresh's share of the cores.
        SnapshotHolder.refresh_if_needed = lambda self, **kwargs: None  # type: ignore[method-assign]
    ready.put(server.server_address[1])
    stop.wait()
    stop_webhook_server(server, stop_event, threads)
    timings.put((spent, reloads))


def _refresh_loop(workloads: int, ready: Any, stop: Any, done: Any) -> None:
    """The background refresh: a simulated cluster's first contact (1 h of history),
    then steady cycles a simulated minute apart until ``stop``; puts the cycles'
    seconds on ``done``."""
    from datetime import UTC, datetime, timedelta

    from django.conf import settings
    from django.db import connections

    from recommender.models import Cluster
    from recommender.services.refresh.cycle import refresh_cluster

    connections.close_all()  # the parent's, inherited by fork
    settings.SIMULATION_WORKLOADS = workloads
    settings.SIMULATION_HISTORY_DAYS = 1 / 24
    cluster = Cluster.objects.create(name="bench-refresh", kind="simulated")
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    refresh_cluster(cluster_id=cluster.pk, now=now)
    ready.put(True)
    cycles = []
    served_changes = int(os.environ.get("BENCH_SERVED_CHANGES", "0"))
    rng = random.Random(11)
    while not stop.is_set():
        now += timedelta(minutes=1)
        began = time.perf_counter()
        if served_changes:
            _change_served(served_changes, rng)
        refresh_cluster(cluster_id=cluster.pk, now=now)
        cycles.append(time.perf_counter() - began)
    done.put(cycles)


def _change_served(count: int, rng: random.Random) -> None:
    """What a refresh of the served cluster writes for ``count`` of its actionable
    workloads: a new recommendation per container, the containers' pointers moved, the
    workloads journaled for the webhook, in one transaction (the cycle right after
    tells the webhook to reload)."""
    from django.db import transaction
    from django.utils import timezone

    from recommender.models import Container, Recommendation, Workload
    from recommender.services.readmodels.generation import note_admission_changes

    served = Workload.objects.get(cluster__name="bench", name="service-00000").cluster
    actionable = list(
        Workload.objects.filter(cluster=served)
        .exclude(policy__mode="Off")
        .values_list("pk", flat=True)
    )
    chosen = rng.sample(actionable, min(count, len(actionable)))
    mi = 2**20
    with transaction.atomic():
        containers = list(Container.objects.filter(workload_id__in=chosen))
        recs = Recommendation.objects.bulk_create(
            [
                Recommendation(
                    container=c,
                    created_at=timezone.now(),
                    target_cpu_millicores=rng.randrange(100, 500),
                    target_memory_bytes=rng.randrange(64, 320) * mi,
                    lower_cpu_millicores=80,
                    lower_memory_bytes=48 * mi,
                    upper_cpu_millicores=900,
                    upper_memory_bytes=900 * mi,
                    uncapped_cpu_millicores=300,
                    uncapped_memory_bytes=128 * mi,
                    confidence=8.0,
                )
                for c in containers
            ],
            batch_size=2000,
        )
        for container, rec in zip(containers, recs, strict=True):
            container.latest_recommendation = rec
        Container.objects.bulk_update(
            containers, ["latest_recommendation"], batch_size=2000
        )
        note_admission_changes(cluster_id=served.pk, workload_ids=chosen)


def _free_port() -> int:
    """A port free now, for server processes that share it (SO_REUSEPORT)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _bodies(keys: list[tuple[str, str, str]], count: int) -> list[tuple[str, bytes]]:
    """``count`` reviews: the recorded pod owned by random workloads, new uids."""
    template = json.loads((WIRE / "a-replicaset-pod.admissionreview.json").read_text())
    template = template["body"]
    rng = random.Random(7)
    bodies = []
    for i in range(count):
        namespace, kind, name = rng.choice(keys)
        review = copy.deepcopy(template)
        request = review["request"]
        request["uid"] = f"00000000-0000-4000-8000-{i:012d}"
        request["namespace"] = namespace
        metadata = request["object"]["metadata"]
        metadata["namespace"] = namespace
        if kind == "Deployment":
            owner_kind, owner = "ReplicaSet", f"{name}-65fb8b7c8"
            metadata["labels"] = {"app": name, "pod-template-hash": "65fb8b7c8"}
        else:
            owner_kind, owner = kind, name
            metadata["labels"] = {"app": name}
        metadata["ownerReferences"][0].update(kind=owner_kind, name=owner)
        bodies.append((request["uid"], json.dumps(review).encode()))
    return bodies


def _load(
    port: int, ca: str, bodies: list[tuple[str, bytes]], rate: float
) -> tuple[list[tuple[float, float]], int, int, float]:
    """Send ``bodies`` open loop at ``rate``/s; ((sent at, latency ms) of each answer,
    errors, patched, lag)."""
    context = ssl.create_default_context(cafile=ca)
    work: queue.Queue[tuple[float, str, bytes] | None] = queue.Queue()
    latencies: list[tuple[float, float]] = []
    errors = [0]
    patched = [0]
    max_lag = [0.0]
    lock = threading.Lock()

    def worker() -> None:
        conn = http.client.HTTPSConnection(
            "localhost", port, context=context, timeout=10
        )
        while (item := work.get()) is not None:
            due, uid, body = item
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            started = time.perf_counter()
            try:
                conn.request(
                    "POST",
                    "/mutate?timeout=3s",
                    body=body,
                    headers={"Content-Type": "application/json"},
                )
                response = conn.getresponse()
                answer = json.loads(response.read())
                elapsed = (time.perf_counter() - started) * 1000
                reply = answer.get("response", {})
                ok = (
                    response.status == 200
                    and reply.get("uid") == uid
                    and reply.get("allowed") is True
                )
            except (OSError, ValueError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPSConnection(
                    "localhost", port, context=context, timeout=10
                )
                ok, elapsed, reply = False, 0.0, {}
            with lock:
                if ok:
                    latencies.append((started, elapsed))
                    patched[0] += "patch" in reply
                else:
                    errors[0] += 1
                max_lag[0] = max(max_lag[0], started - due)
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(CONNECTIONS)]
    for thread in threads:
        thread.start()
    start = time.perf_counter() + 0.5
    for i, (uid, body) in enumerate(bodies):
        work.put((start + i / rate, uid, body))
    for _ in threads:
        work.put(None)
    for thread in threads:
        thread.join()
    return latencies, errors[0], patched[0], max_lag[0] * 1000


def main() -> None:
    """Seed, serve in another process, load, print the figures."""
    workload_count = int(os.environ.get("BENCH_WORKLOADS", "10000"))
    rate = float(os.environ.get("BENCH_RATE", "200"))
    seconds = float(os.environ.get("BENCH_SECONDS", "30"))
    _setup_django()
    from django.db import connections
    from django.db.models import Sum

    from recommender.models import AdmissionCount
    from recommender.services.admission.certs import create_certificates

    started = time.perf_counter()
    keys = _seed(workload_count)
    print(f"seeded {workload_count} workloads in {time.perf_counter() - started:.1f} s")
    certs = create_certificates(
        directory=Path(tempfile.mkdtemp(prefix="vpaweb-bench-certs-")),
        dns_names=["localhost"],
    )
    bodies = _bodies(keys, int(rate * seconds))
    connections.close_all()  # the server process opens its own
    mp = multiprocessing.get_context("fork")
    refresh_workloads = int(os.environ.get("BENCH_REFRESH_WORKLOADS", "0"))
    refresher = None
    refreshed, refresh_stop, cycles = mp.Queue(), mp.Event(), mp.Queue()
    if refresh_workloads:
        refresher = mp.Process(
            target=_refresh_loop,
            args=(refresh_workloads, refreshed, refresh_stop, cycles),
        )
        refresher.start()
        refreshed.get(timeout=1800)  # its first contact is over
    ready, stop, timings = mp.Queue(), mp.Event(), mp.Queue()
    # BENCH_WEBHOOK_PROCESSES server processes on one port (SO_REUSEPORT).
    processes = int(os.environ.get("BENCH_WEBHOOK_PROCESSES", "1"))
    shared_port = _free_port() if processes > 1 else 0
    servers = [
        mp.Process(
            target=_serve,
            args=(str(certs.cert), str(certs.key), ready, stop, timings, shared_port),
        )
        for _ in range(processes)
    ]
    for server in servers:
        server.start()
    try:
        ports = [ready.get(timeout=300) for _ in servers]  # every one is ready
        port = ports[0]
        load_before = os.getloadavg()
        timeline, errors, patched, lag_ms = _load(
            port, str(certs.ca_cert), bodies, rate
        )
    finally:
        stop.set()
        refresh_stop.set()
        spent_ms: list[float] = []
        reloads: list[tuple[float, float, int | None, float]] = []
        for _ in servers:
            one_spent, one_reloads = timings.get(timeout=60)
            spent_ms += one_spent
            reloads += one_reloads
        spent = sorted(spent_ms)
        for server in servers:
            server.join(timeout=30)
        refresh_s = cycles.get(timeout=600) if refresher is not None else []
        if refresher is not None:
            refresher.join(timeout=30)
    totals = {
        row["outcome"]: row["n"]
        for row in AdmissionCount.objects.filter(cluster_name="bench")
        .values("outcome")
        .annotate(n=Sum("count"))
    }
    latencies = sorted(elapsed for _, elapsed in timeline)
    p50 = statistics.median(latencies) if latencies else float("nan")
    p99 = latencies[int(len(latencies) * 0.99) - 1] if latencies else float("nan")
    worst = latencies[-1] if latencies else float("nan")
    print(
        f"{len(bodies)} reviews at {rate:g}/s over {CONNECTIONS} HTTPS keep-alive "
        f"connections, {workload_count} workloads, {processes} server process(es)"
    )
    print(f"round trip ms: p50 {p50:.2f}  p99 {p99:.2f}  max {worst:.2f}")
    print(
        f"server time ms (inside WebhookApp.handle): "
        f"p50 {statistics.median(spent):.2f}  "
        f"p99 {spent[int(len(spent) * 0.99) - 1]:.2f}  max {spent[-1]:.2f}"
    )
    load = os.getloadavg()
    print(
        f"machine: {os.cpu_count()} CPUs, load average {load_before[0]:.1f} at the "
        f"start, {load[0]:.1f} / {load[1]:.1f} (1 / 5 min) at the end: other "
        "processes share the cores"
    )
    if refresher is not None:
        print(
            f"refresh beside it: {refresh_workloads} simulated workloads, "
            f"{len(refresh_s)} cycles, "
            + ", ".join(f"{c:.1f}" for c in refresh_s)
            + " s"
        )
    print(
        f"webhook cache reloads during the load: {len(reloads)}; wall / CPU ms "
        "(workloads read again, all = a full rebuild): "
        + ", ".join(
            f"{wall * 1000:.0f} / {cpu * 1000:.0f}"
            + f" ({'all' if reloaded is None else reloaded})"
            for wall, cpu, reloaded, _ in reloads
        )
    )
    if reloads:
        # The answers whose round trip overlapped a reload, against the others.
        spans = [(began, began + wall) for wall, _, _, began in reloads]
        during = sorted(
            elapsed
            for sent, elapsed in timeline
            if any(sent < end and sent + elapsed / 1000 > start for start, end in spans)
        )
        others = sorted(
            elapsed
            for sent, elapsed in timeline
            if not any(
                sent < end and sent + elapsed / 1000 > start for start, end in spans
            )
        )
        for label, group in (("overlapping a reload", during), ("the others", others)):
            if group:
                print(
                    f"round trip ms of the {len(group)} answers {label}: p50 "
                    f"{statistics.median(group):.2f}  "
                    f"p99 {group[max(int(len(group) * 0.99) - 1, 0)]:.2f}  "
                    f"max {group[-1]:.2f}"
                )
        print(
            "reload CPU per refresh ms: "
            f"mean {statistics.mean(r[1] for r in reloads) * 1000:.1f}  "
            f"max {max(r[1] for r in reloads) * 1000:.1f}"
        )
    print(
        f"errors {errors}; server counts: patched {totals.get('patched', 0)}, "
        f"left alone {totals.get('left_alone', 0)}, "
        f"failed open {totals.get('failed_open', 0)}; "
        f"patches received {patched}; client max send lag {lag_ms:.1f} ms"
    )
    verdict = "OK" if p99 <= TARGET_P99_MS and errors == 0 else "MISSED"
    print(f"target p99 <= {TARGET_P99_MS:g} ms and zero errors: {verdict}")


if __name__ == "__main__":
    main()
