"""The dashboard's overview: fleet, cluster and namespace totals, savings, risk, the
confidence of recommendations and the latest runs, in a constant number of queries.

Risk, waste and savings follow the definitions in recommender/models/provisioning.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import (
    Case,
    Count,
    F,
    IntegerField,
    Q,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce

from recommender.models import Cluster, Container, OomKill, RefreshRun, Workload
from recommender.models.provisioning import no_data_q
from recommender.services.dashboard.provisioning import (
    RECENT_OOM_WINDOW,
    Prices,
    no_recommendation_reason,
    risk_rules,
)

# --- The overview ---------------------------------------------------------------------


@dataclass
class Totals:
    """Requested vs recommended amounts of one group (all replicas)."""

    cluster: str = ""
    namespace: str = ""
    containers: int = 0
    covered: int = 0
    requested_cpu_millicores: int = 0
    requested_memory_bytes: int = 0
    # Requests of the containers that have a target, compared with the targets.
    covered_requested_cpu_millicores: int = 0
    covered_requested_memory_bytes: int = 0
    recommended_cpu_millicores: int = 0
    recommended_memory_bytes: int = 0
    savings: float = 0.0

    @property
    def coverage(self) -> float:
        """Share of containers with a recommendation (0..1)."""
        return self.covered / self.containers if self.containers else 0.0

    def add(self, other: Totals) -> None:
        """Accumulate another group into this one."""
        for name in (
            "containers",
            "covered",
            "requested_cpu_millicores",
            "requested_memory_bytes",
            "covered_requested_cpu_millicores",
            "covered_requested_memory_bytes",
            "recommended_cpu_millicores",
            "recommended_memory_bytes",
            "savings",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class Overview:
    """Everything the overview page shows."""

    fleet: Totals
    by_cluster: list[Totals]
    by_namespace: list[Totals]
    # Workloads at risk (recent OOM kills or a material shortfall), riskiest first.
    at_risk_count: int
    at_risk: list[Workload]
    missing_requests_count: int
    recent_ooms: list[OomKill]
    recent_oom_count: int
    no_recommendation_count: int
    no_recommendation: list[dict[str, Any]]
    confidence: dict[str, int]
    runs: list[RefreshRun]
    is_refreshing: bool
    prices: Prices
    workload_count: int = 0
    # "cluster: VPA object X targets Deployment/ghost, which does not exist".
    vpa_warnings: list[str] = field(default_factory=list)


def _fleet_totals(*, prices: Prices) -> tuple[Totals, list[Totals], list[Totals]]:
    """Totals of the fleet, per cluster and per (cluster, namespace): one query."""
    replicas = Coalesce(F("workload__replicas"), Value(1))
    has_target_cpu = Q(latest_recommendation__target_cpu_millicores__isnull=False)
    has_target_mem = Q(latest_recommendation__target_memory_bytes__isnull=False)

    def summed(expr: Any, when: Q | None = None) -> Sum:
        value = expr * replicas
        if when is not None:
            value = Case(When(when, then=value), default=Value(0))
        return Sum(value, output_field=IntegerField())

    rows = (
        Container.objects.recommended()
        .shown()
        .order_by()
        .values("workload__cluster__name", "workload__namespace")
        .annotate(
            containers=Count("pk"),
            covered=Count("pk", filter=~no_data_q()),
            requested_cpu=summed(Coalesce(F("request_cpu_millicores"), Value(0))),
            requested_mem=summed(Coalesce(F("request_memory_bytes"), Value(0))),
            covered_requested_cpu=summed(
                Coalesce(F("request_cpu_millicores"), Value(0)), has_target_cpu
            ),
            covered_requested_mem=summed(
                Coalesce(F("request_memory_bytes"), Value(0)), has_target_mem
            ),
            recommended_cpu=summed(
                F("latest_recommendation__target_cpu_millicores"), has_target_cpu
            ),
            recommended_mem=summed(
                F("latest_recommendation__target_memory_bytes"), has_target_mem
            ),
        )
        .order_by("workload__cluster__name", "workload__namespace")
    )
    fleet = Totals()
    clusters: dict[str, Totals] = {}
    namespaces = []
    for row in rows:
        group = Totals(
            cluster=row["workload__cluster__name"],
            namespace=row["workload__namespace"],
            containers=row["containers"],
            covered=row["covered"],
            requested_cpu_millicores=row["requested_cpu"] or 0,
            requested_memory_bytes=row["requested_mem"] or 0,
            covered_requested_cpu_millicores=row["covered_requested_cpu"] or 0,
            covered_requested_memory_bytes=row["covered_requested_mem"] or 0,
            recommended_cpu_millicores=row["recommended_cpu"] or 0,
            recommended_memory_bytes=row["recommended_mem"] or 0,
        )
        group.savings = prices.monthly(
            cpu_millicores=group.covered_requested_cpu_millicores
            - group.recommended_cpu_millicores,
            memory_bytes=group.covered_requested_memory_bytes
            - group.recommended_memory_bytes,
        )
        namespaces.append(group)
        clusters.setdefault(group.cluster, Totals(cluster=group.cluster)).add(group)
        fleet.add(group)
    return fleet, list(clusters.values()), namespaces


def confidence_of(explanation: dict[str, Any]) -> float | None:
    """The CPU confidence of an engine explanation (upstream uses it for both)."""
    resources = explanation.get("resources")
    cpu = resources.get("cpu") if isinstance(resources, dict) else None
    value = cpu.get("confidence") if isinstance(cpu, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


# Above any real confidence (days of history); the upper end of the "high" band.
MAX_CONFIDENCE = 1e12
# Confidence bands (in days of history, upstream's unit): below 1 the bounds are widened
# a lot.
CONFIDENCE_BANDS = (("low", 1.0), ("medium", 7.0), ("high", float("inf")))


def confidence_band(confidence: float | None) -> str:
    """ "low" (< 1 day), "medium" (< 7 days), "high", or "unknown"."""
    if confidence is None:
        return "unknown"
    for name, upper in CONFIDENCE_BANDS:
        if confidence < upper:
            return name
    return "high"


def _confidence_distribution() -> dict[str, int]:
    """How many latest recommendations fall in each confidence band: one query.

    Every band has both ends: a JSON string sorts above all numbers in SQLite and below
    them in PostgreSQL, so a malformed value falls outside every band ("unknown") on
    both.
    """
    prefix = "latest_recommendation__explanation__"

    def band(low: float, high: float) -> Q:
        # Explanation.to_dict(): resources.cpu.confidence (see confidence_of).
        key = f"{prefix}resources__cpu__confidence"
        return Q(**{f"{key}__gte": low, f"{key}__lt": high})

    counts = (
        Container.objects.recommended()
        .shown()
        .filter(latest_recommendation__isnull=False)
        .aggregate(
            total=Count("pk"),
            low=Count("pk", filter=band(0.0, CONFIDENCE_BANDS[0][1])),
            medium=Count(
                "pk", filter=band(CONFIDENCE_BANDS[0][1], CONFIDENCE_BANDS[1][1])
            ),
            high=Count("pk", filter=band(CONFIDENCE_BANDS[1][1], MAX_CONFIDENCE)),
        )
    )
    known = counts["low"] + counts["medium"] + counts["high"]
    return {
        "low": counts["low"],
        "medium": counts["medium"],
        "high": counts["high"],
        "unknown": counts["total"] - known,
    }


def fleet_overview(*, now: datetime, prices: Prices, limit: int = 10) -> Overview:
    """Fleet totals, savings, workloads at risk, coverage, confidence, last runs."""
    fleet, by_cluster, by_namespace = _fleet_totals(prices=prices)
    active = Workload.objects.shown()
    # Workloads at risk, riskiest first (OOM kills, then the largest shortfall; then
    # the largest savings): all their ids in one aggregate query (the count), the top
    # ones loaded with their facts.
    facts = active.with_provisioning(prices=prices, rules=risk_rules(now))
    ranked = list(
        facts.at_risk().order_by("-risk", "-savings", "pk").values_list("pk", flat=True)
    )
    top = ranked[:limit]
    at_risk = sorted(
        facts.filter(pk__in=top).select_related("cluster"),
        key=lambda w: top.index(w.pk),
    )
    missing_requests = (
        Container.objects.recommended()
        .shown()
        .missing_requests()
        .values("workload_id")
        .distinct()
        .count()
    )
    ooms = OomKill.objects.filter(
        container__workload__is_active=True,
        container__workload__cluster__is_enabled=True,
        occurred_at__gte=now - RECENT_OOM_WINDOW,
    )
    missing = (
        Container.objects.recommended()
        .shown()
        .no_data()
        .select_related("workload", "latest_recommendation", "checkpoint")
        .order_by("workload__namespace", "workload__name", "name")
    )
    runs = list(RefreshRun.objects.select_related("cluster")[:limit])
    return Overview(
        fleet=fleet,
        by_cluster=by_cluster,
        by_namespace=by_namespace,
        at_risk_count=len(ranked),
        at_risk=at_risk,
        missing_requests_count=missing_requests,
        recent_ooms=list(
            ooms.select_related("container__workload").order_by("-occurred_at")[:limit]
        ),
        recent_oom_count=ooms.count(),
        no_recommendation_count=missing.count(),
        no_recommendation=[
            {"container": c, "reason": no_recommendation_reason(c)}
            for c in missing[:limit]
        ],
        confidence=_confidence_distribution(),
        runs=runs,
        is_refreshing=any(run.status == RefreshRun.Status.RUNNING for run in runs),
        prices=prices,
        workload_count=active.count(),
        vpa_warnings=[
            f"{name}: {entry['message']}"
            for name, entries in Cluster.objects.filter(is_enabled=True)
            .order_by("name")
            .values_list("name", "vpa_objects_without_target")
            for entry in entries or []
        ],
    )
