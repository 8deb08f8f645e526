"""vpaweb's own Prometheus metrics (docs/metrics.md)."""
# Two kinds of series:
#
# * **Process counters**, kept by prometheus-client in the process that does the work,
#   multi-process safe: with ``PROMETHEUS_MULTIPROC_DIR`` set (the image sets it), every
#   gunicorn or Celery child writes its values to files there and one scrape adds them
#   up. The refresh counters are recorded when a run finishes, by whichever process ran
#   it (:func:`record_finished_run`, called by services/operations/runs.py): the web
#   process under ``make run``, the Celery worker in compose and Kubernetes, which
#   serves them on ``VPAWEB_WORKER_METRICS_PORT`` (:func:`serve_worker_metrics`).
# * **Database gauges**, read at scrape time by :class:`DatabaseCollector` on the web's
#   ``/metrics``: containers without a recommendation, the last finished run of each
#   kind and outcome, runs in progress. Any web replica answers the same.
#
# The webhook and the updater increment the ``WEBHOOK_*`` and
# ``UPDATER_*`` objects below from their own code; nothing else defines metrics.

from __future__ import annotations

import hmac
import os
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
    multiprocess,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector

# No *_created series: multi-process mode has none either; every process looks alike.
disable_created_metrics()  # type: ignore[no-untyped-call]

# --- Refresh runs (recorded by record_finished_run) ----------------------------------
REFRESH_RUNS = Counter(
    "vpaweb_refresh_runs",
    "Finished background runs (refresh, back-fill, expiry) by kind and outcome.",
    ["kind", "outcome"],
)
REFRESH_PHASE_SECONDS = Histogram(
    "vpaweb_refresh_phase_duration_seconds",
    "Seconds a finished run spent in each phase (discover, upsert, ingest, recommend, "
    "store, ...; total is the whole run), by kind and outcome.",
    ["kind", "phase", "outcome"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900),
)
SAMPLES_INGESTED = Counter(
    "vpaweb_samples_ingested",
    "Usage samples ingested by finished runs, by kind.",
    ["kind"],
)

# --- Admission webhook (services/admission/counters.count increments these; the
# webhook's own HTTPS server serves them on GET /metrics) -----------------------------
WEBHOOK_REQUESTS = Counter(
    "vpaweb_webhook_requests",
    "AdmissionReview requests answered (dry runs left out), by resource (pods) and "
    "outcome (patched, left_alone, failed_open).",
    ["resource", "outcome"],
)
WEBHOOK_PATCHES = Counter(
    "vpaweb_webhook_patches",
    "JSONPatch operations sent in admission answers, by resource.",
    ["resource"],
)
WEBHOOK_FAIL_OPENS = Counter(
    "vpaweb_webhook_fail_opens",
    "Admission requests allowed unpatched because vpaweb could not answer in time or "
    "hit an error (the pod starts with its own requests), by reason (deadline, "
    "internal_error, malformed, cache, unreadable_spec, limit_range, other).",
    ["reason"],
)
WEBHOOK_REFUSED = Counter(
    "vpaweb_webhook_refused",
    "Connections and requests the webhook refused or dropped before an "
    "AdmissionReview was read (none is a decision: the API server admits the pod "
    "unchanged), by reason (connections, slow, too_large, busy, malformed, "
    "unauthenticated).",
    ["reason"],
)
WEBHOOK_LATENCY = Histogram(
    "vpaweb_webhook_request_duration_seconds",
    "Seconds from receiving an AdmissionReview to sending the answer.",
    ["resource"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)

# --- Updater hooks (the updater increments these); method: in-place or eviction ---
UPDATER_PROPOSALS = Counter(
    "vpaweb_updater_proposals", "Resize changes proposed, by method.", ["method"]
)
UPDATER_APPROVALS = Counter(
    "vpaweb_updater_approvals", "Resize changes approved, by method.", ["method"]
)
UPDATER_APPLIED = Counter(
    "vpaweb_updater_applied", "Resize changes applied, by method.", ["method"]
)
UPDATER_FAILED = Counter(
    "vpaweb_updater_failed", "Resize changes that failed, by method.", ["method"]
)
UPDATER_REFUSED_429 = Counter(
    "vpaweb_updater_refused_429",
    "HTTP 429 answers to the updater (an eviction refused by a PodDisruptionBudget, or "
    "throttling), by method.",
    ["method"],
)
UPDATER_METHODS = ("in-place", "eviction")

# --- CPU startup boost: the webhook counts boosts, the updater un-boosts ------------
STARTUP_BOOSTS = Counter(
    "vpaweb_startup_boosts",
    "CPU startup boosts: pods admitted boosted (event boosted, by the webhook) and "
    "boosted pods shrunk in place to their recommendation (event unboosted, by the "
    "updater).",
    ["event"],
)
STARTUP_BOOST_EVENTS = ("boosted", "unboosted")
for _event in STARTUP_BOOST_EVENTS:
    STARTUP_BOOSTS.labels(event=_event)

for _method in UPDATER_METHODS:
    for _counter in (
        UPDATER_PROPOSALS,
        UPDATER_APPROVALS,
        UPDATER_APPLIED,
        UPDATER_FAILED,
        UPDATER_REFUSED_429,
    ):
        _counter.labels(method=_method)


def record_finished_run(run: Any) -> None:
    """Count a RefreshRun that has just been saved as succeeded or failed."""
    if run.status not in ("succeeded", "failed"):
        return
    REFRESH_RUNS.labels(kind=run.kind, outcome=run.status).inc()
    for name, seconds in (run.timings or {}).items():
        if isinstance(seconds, int | float) and seconds >= 0:
            REFRESH_PHASE_SECONDS.labels(
                kind=run.kind, phase=name.removesuffix("_s"), outcome=run.status
            ).observe(seconds)
    samples = (run.counts or {}).get("samples")
    if isinstance(samples, int) and samples > 0:
        SAMPLES_INGESTED.labels(kind=run.kind).inc(samples)


class DatabaseCollector(Collector):
    """Gauges read from the database at scrape time (any web replica answers alike)."""

    def collect(self) -> Iterator[Metric]:
        from django.db.models import Count, Max

        from recommender.models import Container, RefreshRun

        without = GaugeMetricFamily(
            "vpaweb_containers_without_recommendation",
            "Containers of active workloads in enabled clusters that have no "
            "recommendation yet (no or too little usage data), by cluster. Init "
            "containers are left out: like upstream VPA, vpaweb never recommends them.",
            labels=["cluster"],
        )
        rows = (
            Container.objects.exclude(kind=Container.Kind.INIT)
            .filter(
                workload__is_active=True,
                workload__cluster__is_enabled=True,
                latest_recommendation__isnull=True,
            )
            .values("workload__cluster__name")
            .annotate(n=Count("id"))
        )
        counted = {row["workload__cluster__name"]: row["n"] for row in rows}
        from recommender.models import Cluster

        for name in Cluster.objects.filter(is_enabled=True).values_list(
            "name", flat=True
        ):
            without.add_metric([name], counted.get(name, 0))
        yield without

        last = GaugeMetricFamily(
            "vpaweb_refresh_last_finished_timestamp_seconds",
            "When the last run of each kind and outcome finished (Unix time).",
            labels=["kind", "outcome"],
        )
        finished = (
            RefreshRun.objects.exclude(status=RefreshRun.Status.RUNNING)
            .values("kind", "status")
            .annotate(at=Max("finished_at"))
        )
        for row in finished:
            if row["at"] is not None:
                last.add_metric([row["kind"], row["status"]], row["at"].timestamp())
        yield last

        running = GaugeMetricFamily(
            "vpaweb_refresh_runs_in_progress",
            "Runs started and not finished, by kind.",
            labels=["kind"],
        )
        in_progress = dict(
            RefreshRun.objects.filter(status=RefreshRun.Status.RUNNING)
            .values_list("kind")
            .annotate(n=Count("id"))
            .values_list("kind", "n")
        )
        for kind in RefreshRun.Kind.values:
            running.add_metric([kind], in_progress.get(kind, 0))
        yield running


def process_registry() -> CollectorRegistry:
    """The process counters: every process's files in multi-process mode, else ours."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return registry
    return REGISTRY


def exposition(*, with_database: bool) -> tuple[bytes, str]:
    """The text exposition (and its Content-Type) of the process counters, plus the
    database gauges when asked."""
    body = generate_latest(process_registry())
    if with_database:
        database = CollectorRegistry(auto_describe=False)
        database.register(DatabaseCollector())
        body += generate_latest(database)
    # The classic text format (0.0.4): every Prometheus 2.x and 3.x reads it.
    return body, CONTENT_TYPE_PLAIN_0_0_4


def token_matches(expected: str, headers: Mapping[str, str]) -> bool:
    """Whether the request carries ``Authorization: Bearer <expected>``."""
    header = headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    return (
        bool(expected)
        and scheme.lower() == "bearer"
        and hmac.compare_digest(given.strip().encode(), expected.encode())
    )


def serve_worker_metrics(port: int) -> None:
    """Serve the process counters on ``port`` (all interfaces) from a daemon thread:
    the Celery worker's separate metrics port, meant for in-cluster scraping only."""
    start_http_server(port, registry=process_registry())


def mark_process_dead(pid: int) -> None:
    """Drop a finished child's live gauges (gunicorn child_exit, Celery child exit)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
