"""Recommendations as Prometheus series, for Grafana and alerting (``GET
/metrics/recommendations``, docs/metrics.md).

Per container, labelled ``cluster``, ``namespace``, ``workload``, ``kind`` and
``container``: the requests, the target and the lower and upper bounds (``_cores`` and
``_bytes``), whether it is at risk and its monthly savings, as the dashboard shows them
(``Container.objects.with_provisioning``); per namespace, the savings, the containers at
risk and those left out. ``Bound`` limits the per-container series.
"""
# Ten series a container, so the export is bounded: only the namespaces asked for (all
# when none), and of those the first ``top`` containers, at-risk ones first (highest
# risk score), then by the size of their savings. The per-namespace series are not
# bounded by ``top`` (savings from ``namespace_savings``, the workloads list's), so
# fleet totals stay whole whatever the bound. ``vpaweb_recommendation_series`` says
# how many series the answer holds.

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, F, Q
from django.db.models.functions import Abs
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from recommender.models import Container
from recommender.models.provisioning import ContainerQuerySet
from recommender.services.readmodels.namespace_savings import namespace_savings
from recommender.services.readmodels.provisioning import Prices, risk_rules

# The default bound: 1,000 containers, 10,000 per-container series.
DEFAULT_TOP = 1000
# The largest bound a scrape may ask for (a 100,000-container fleet whole).
MAX_TOP = 100_000
LABELS = ["cluster", "namespace", "workload", "kind", "container"]
# (metric suffix, help, row field, scale): the per-container gauges.
PER_CONTAINER = (
    (
        "request_cpu_cores",
        "The container's CPU request",
        "request_cpu_millicores",
        1e-3,
    ),
    (
        "request_memory_bytes",
        "The container's memory request",
        "request_memory_bytes",
        1,
    ),
    (
        "target_cpu_cores",
        "The recommended CPU request (target)",
        "latest_recommendation__target_cpu_millicores",
        1e-3,
    ),
    (
        "target_memory_bytes",
        "The recommended memory request (target)",
        "latest_recommendation__target_memory_bytes",
        1,
    ),
    (
        "lower_bound_cpu_cores",
        "The recommendation's CPU lower bound",
        "latest_recommendation__lower_cpu_millicores",
        1e-3,
    ),
    (
        "lower_bound_memory_bytes",
        "The recommendation's memory lower bound",
        "latest_recommendation__lower_memory_bytes",
        1,
    ),
    (
        "upper_bound_cpu_cores",
        "The recommendation's CPU upper bound",
        "latest_recommendation__upper_cpu_millicores",
        1e-3,
    ),
    (
        "upper_bound_memory_bytes",
        "The recommendation's memory upper bound",
        "latest_recommendation__upper_memory_bytes",
        1,
    ),
)
LABEL_FIELDS = (
    "workload__cluster__name",
    "workload__namespace",
    "workload__name",
    "workload__kind",
    "name",
)


@dataclass(frozen=True)
class Bound:
    """Which containers get per-container series: ``namespaces`` (all when empty) and
    at most ``top`` of them."""

    namespaces: tuple[str, ...] = ()
    top: int = DEFAULT_TOP


class RecommendationCollector(Collector):
    """The series of the module docstring, read from the database at scrape time."""

    def __init__(self, *, bound: Bound, now: datetime) -> None:
        self.bound = bound
        self.now = now

    def collect(self) -> Iterator[Metric]:
        prices = Prices.from_settings()
        rules = risk_rules(self.now)
        containers = Container.objects.shown().recommended()
        if self.bound.namespaces:
            containers = containers.filter(
                workload__namespace__in=self.bound.namespaces
            )
        facts = containers.with_provisioning(prices=prices, rules=rules).order_by()
        rows = list(
            facts.filter(latest_recommendation__isnull=False)
            .annotate(size=Abs(F("savings")))
            .order_by(F("risk").desc(), F("size").desc(nulls_last=True), "pk")
            .values(*LABEL_FIELDS, *(f for _, _, f, _ in PER_CONTAINER))
            .annotate(f_risk=F("risk"), f_savings=F("savings"))[: self.bound.top]
        )
        per_container = [
            GaugeMetricFamily(f"vpaweb_recommendation_{suffix}", text, labels=LABELS)
            for suffix, text, _, _ in PER_CONTAINER
        ]
        at_risk = GaugeMetricFamily(
            "vpaweb_recommendation_at_risk",
            "1 when the container is at risk (recent OOM kills or a request below its "
            "usage floor), else 0",
            labels=LABELS,
        )
        savings = GaugeMetricFamily(
            "vpaweb_recommendation_monthly_savings",
            "What the container's recommendation saves a month over all its pods, in "
            "the currency of VPAWEB_PRICE_PER_CORE_HOUR (negative: it asks for more)",
            labels=LABELS,
        )
        exported: dict[tuple[str, str], int] = defaultdict(int)
        for row in rows:
            labels = [str(row[f]) for f in LABEL_FIELDS]
            exported[labels[0], labels[1]] += 1
            for family, (_, _, field, scale) in zip(
                per_container, PER_CONTAINER, strict=True
            ):
                if row[field] is not None:
                    family.add_metric(labels, row[field] * scale)
            at_risk.add_metric(labels, 1.0 if row["f_risk"] > 0 else 0.0)
            savings.add_metric(labels, float(row["f_savings"] or 0.0))
        yield from per_container
        yield at_risk
        yield savings
        yield from self._namespace_families(facts, exported)

    def _namespace_families(
        self, facts: ContainerQuerySet, exported: dict[tuple[str, str], int]
    ) -> Iterator[Metric]:
        """Per-namespace totals: savings, containers at risk and left out."""
        labels = ["cluster", "namespace"]
        totals = GaugeMetricFamily(
            "vpaweb_namespace_monthly_savings",
            "The namespace's monthly savings, as the workloads list sums them",
            labels=labels,
        )
        for (cluster, namespace), total in sorted(
            namespace_savings(prices=Prices.from_settings(), now=self.now).items()
        ):
            if not self.bound.namespaces or namespace in self.bound.namespaces:
                totals.add_metric([cluster, namespace], total)
        yield totals
        risky = GaugeMetricFamily(
            "vpaweb_namespace_containers_at_risk",
            "Containers at risk in the namespace (every one, whatever the bound)",
            labels=labels,
        )
        left_out = GaugeMetricFamily(
            "vpaweb_recommendation_containers_omitted",
            "Containers with a recommendation but no per-container series: past the "
            "scrape's top bound",
            labels=labels,
        )
        counts = (
            facts.filter(latest_recommendation__isnull=False)
            .values("workload__cluster__name", "workload__namespace")
            .annotate(
                n=Count("pk"),
                risky=Count("pk", filter=Q(risk__gt=0)),
            )
            .order_by("workload__cluster__name", "workload__namespace")
        )
        for row in counts:
            key = (row["workload__cluster__name"], row["workload__namespace"])
            risky.add_metric(list(key), row["risky"])
            left_out.add_metric(list(key), row["n"] - exported.get(key, 0))
        yield risky
        yield left_out


def exposition(*, bound: Bound, now: datetime) -> bytes:
    """The text exposition (format 0.0.4) of the recommendation series."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RecommendationCollector(bound=bound, now=now))
    body = generate_latest(registry)
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    # Counting itself: the answer's own size, so a dashboard can watch the bound.
    return body + (
        b"# HELP vpaweb_recommendation_series Series in this answer (this one "
        b"included).\n# TYPE vpaweb_recommendation_series gauge\n"
        + f"vpaweb_recommendation_series {series + 1}\n".encode()
    )
