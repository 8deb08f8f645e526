"""Read-side use cases of the dashboard: fleet totals, savings, risk, lists.

Everything here reads; nothing writes. Totals, statuses and savings are computed in SQL
so the list and the overview stay fast with tens of thousands of workloads: a workload's
status and savings are aggregates over one join of its containers and their latest
recommendation (through the denormalised ``Container.latest_recommendation``), never a
Python loop over all rows.

Definitions (also in docs/dashboard.md):
- A container is **under-provisioned** when a request is below the recommendation's
  lower bound (or missing while the recommendation has one), **over-provisioned** when a
  request is above the upper bound, **within bounds** otherwise, and has **no data**
  without a recommendation. A workload takes the worst status of its containers: under,
  then over, then no data.
- **Savings** per month = replicas x (request - target) x price x 730 h, summed over the
  resources that have a target; negative savings mean the workload needs more.
- Init containers are left out, as upstream VPA does not recommend for them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.paginator import Page, Paginator
from django.db.models import (
    Case,
    Count,
    Exists,
    ExpressionWrapper,
    F,
    FloatField,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce

from recommender.models import (
    Cluster,
    Container,
    OomKill,
    Policy,
    RefreshRun,
    Workload,
)

logger = logging.getLogger(__name__)

# 8760 h / 12: the month cloud price lists use.
HOURS_PER_MONTH = 730.0
GIB = 2**30
# OOM kills this recent make a workload "at risk".
RECENT_OOM_WINDOW = timedelta(days=7)
PAGE_SIZE = 50
MAX_PAGE_SIZE = 200


class Status:
    """Provisioning status of a container or a workload (values used in URLs)."""

    UNDER = "under"
    OVER = "over"
    WITHIN = "within"
    NO_DATA = "no-data"
    LABELS = {
        UNDER: "under-provisioned",
        OVER: "over-provisioned",
        WITHIN: "within bounds",
        NO_DATA: "no data",
    }
    CHOICES = tuple(LABELS.items())


SORTS = {
    "name": "name",
    "savings": "savings (largest first)",
    "risk": "risk (highest first)",
}


@dataclass(frozen=True)
class Prices:
    """List prices for the savings estimate."""

    per_core_hour: float
    per_gib_hour: float

    @classmethod
    def from_settings(cls) -> Prices:
        """The prices of VPAWEB_PRICE_PER_CORE_HOUR and VPAWEB_PRICE_PER_GIB_HOUR."""
        return cls(settings.PRICE_PER_CORE_HOUR, settings.PRICE_PER_GIB_HOUR)

    @property
    def per_millicore_month(self) -> float:
        """Price of one millicore for a month."""
        return self.per_core_hour * HOURS_PER_MONTH / 1000.0

    @property
    def per_byte_month(self) -> float:
        """Price of one byte of memory for a month."""
        return self.per_gib_hour * HOURS_PER_MONTH / GIB

    def monthly(self, *, cpu_millicores: float, memory_bytes: float) -> float:
        """Monthly price of an amount of CPU and memory."""
        return (
            cpu_millicores * self.per_millicore_month
            + memory_bytes * self.per_byte_month
        )


# --- Per-container classification (one row, in Python)
# ------------------------------------


def container_status(container: Container) -> str:
    """The provisioning status of one container (latest_recommendation loaded)."""
    rec = container.latest_recommendation
    if rec is None or (
        rec.target_cpu_millicores is None and rec.target_memory_bytes is None
    ):
        return Status.NO_DATA
    pairs = (
        (
            container.request_cpu_millicores,
            rec.lower_cpu_millicores,
            rec.upper_cpu_millicores,
        ),
        (
            container.request_memory_bytes,
            rec.lower_memory_bytes,
            rec.upper_memory_bytes,
        ),
    )
    if any(low is not None and (req is None or req < low) for req, low, _ in pairs):
        return Status.UNDER
    if any(up is not None and req is not None and req > up for req, _, up in pairs):
        return Status.OVER
    return Status.WITHIN


def container_savings(
    container: Container, *, replicas: int | None, prices: Prices
) -> float:
    """Monthly savings of moving a container's requests to the target (all replicas)."""
    rec = container.latest_recommendation
    if rec is None:
        return 0.0
    cpu = memory = 0
    if rec.target_cpu_millicores is not None:
        cpu = (container.request_cpu_millicores or 0) - rec.target_cpu_millicores
    if rec.target_memory_bytes is not None:
        memory = (container.request_memory_bytes or 0) - rec.target_memory_bytes
    return (replicas or 1) * prices.monthly(cpu_millicores=cpu, memory_bytes=memory)


# --- SQL expressions over containers (shared by the list and the overview)
# ----------------


def _under_q(prefix: str = "") -> Q:
    """Containers with a request below the lower bound (or none where a bound is)."""
    q = Q()
    for req, low in (
        ("request_cpu_millicores", "latest_recommendation__lower_cpu_millicores"),
        ("request_memory_bytes", "latest_recommendation__lower_memory_bytes"),
    ):
        has_bound = Q(**{f"{prefix}{low}__isnull": False})
        q |= has_bound & (
            Q(**{f"{prefix}{req}__isnull": True})
            | Q(**{f"{prefix}{req}__lt": F(f"{prefix}{low}")})
        )
    return q


def _over_q(prefix: str = "") -> Q:
    """Containers with a request above the upper bound."""
    q = Q()
    for req, up in (
        ("request_cpu_millicores", "latest_recommendation__upper_cpu_millicores"),
        ("request_memory_bytes", "latest_recommendation__upper_memory_bytes"),
    ):
        q |= Q(**{f"{prefix}{req}__gt": F(f"{prefix}{up}")})
    return q


def _no_data_q(prefix: str = "") -> Q:
    """Containers without a usable recommendation."""
    return Q(**{f"{prefix}latest_recommendation__isnull": True}) | Q(
        **{
            f"{prefix}latest_recommendation__target_cpu_millicores__isnull": True,
            f"{prefix}latest_recommendation__target_memory_bytes__isnull": True,
        }
    )


def recommended_containers() -> QuerySet[Container]:
    """Containers vpaweb recommends for (not init containers, as upstream)."""
    return Container.objects.exclude(kind=Container.Kind.INIT)


def _diff(request: str, target: str) -> Any:
    """request - target as a float expression; 0 where the target is missing."""
    req = Coalesce(F(request), Value(0))
    return Cast(req - Coalesce(F(target), req), FloatField())


def annotate_workloads(
    workloads: QuerySet[Workload], *, now: datetime, prices: Prices
) -> QuerySet[Workload]:
    """Add ``status``, ``savings`` (monthly), ``recent_ooms`` and ``risk`` to workloads.

    Status and savings are aggregates over one join (workload, containers, latest
    recommendation) grouped by workload, which both databases plan as a single hash
    aggregate; correlated subqueries per row were several times slower on PostgreSQL
    with 10,000 rows.
    """
    prefix = "containers__"
    regular = ~Q(containers__kind=Container.Kind.INIT)
    rec = "containers__latest_recommendation__"
    recent_ooms = (
        OomKill.objects.filter(
            container__workload=OuterRef("pk"), occurred_at__gte=now - RECENT_OOM_WINDOW
        )
        .order_by()
        .values("container__workload")
        .annotate(n=Count("pk"))
        .values("n")
    )
    savings_per_pod = Sum(
        _diff(f"{prefix}request_cpu_millicores", f"{rec}target_cpu_millicores")
        * Value(prices.per_millicore_month)
        + _diff(f"{prefix}request_memory_bytes", f"{rec}target_memory_bytes")
        * Value(prices.per_byte_month),
        filter=regular,
        output_field=FloatField(),
    )
    return workloads.annotate(
        under_count=Count("containers", filter=regular & _under_q(prefix)),
        over_count=Count("containers", filter=regular & _over_q(prefix)),
        no_data_count=Count("containers", filter=regular & _no_data_q(prefix)),
        status=Case(
            When(under_count__gt=0, then=Value(Status.UNDER)),
            When(over_count__gt=0, then=Value(Status.OVER)),
            When(no_data_count__gt=0, then=Value(Status.NO_DATA)),
            default=Value(Status.WITHIN),
        ),
        savings=ExpressionWrapper(
            Coalesce(savings_per_pod, Value(0.0))
            * Cast(Coalesce(F("replicas"), Value(1)), FloatField()),
            output_field=FloatField(),
        ),
        recent_ooms=Coalesce(
            Subquery(recent_ooms, output_field=IntegerField()), Value(0)
        ),
        # Under-provisioned first, then by recent OOM kills, then missing
        # recommendations.
        risk=ExpressionWrapper(
            Case(When(under_count__gt=0, then=Value(1000)), default=Value(0))
            + F("recent_ooms") * Value(10)
            + Case(When(no_data_count__gt=0, then=Value(1)), default=Value(0)),
            output_field=IntegerField(),
        ),
    )


# --- The workloads list
# --------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadFilters:
    """What the list is narrowed to; empty strings mean "any"."""

    cluster: str = ""
    namespace: str = ""
    kind: str = ""
    mode: str = ""
    status: str = ""
    q: str = ""
    sort: str = "name"

    def cleaned(self) -> WorkloadFilters:
        """Drop values that cannot match (an unknown status, sort, kind or mode)."""
        return WorkloadFilters(
            cluster=self.cluster.strip(),
            namespace=self.namespace.strip(),
            kind=self.kind if self.kind in Workload.Kind.values else "",
            mode=self.mode if self.mode in Policy.Mode.values else "",
            status=self.status if self.status in Status.LABELS else "",
            q=self.q.strip()[:253],
            sort=self.sort if self.sort in SORTS else "name",
        )


def list_workloads(
    *,
    filters: WorkloadFilters,
    page: int | str = 1,
    page_size: int = PAGE_SIZE,
    now: datetime,
    prices: Prices,
) -> Page:
    """One page of active workloads, filtered and sorted, each with status and savings.

    Rows carry ``status``, ``savings``, ``recent_ooms``, ``risk``, their policy and
    their containers (with latest recommendations) prefetched: a page costs a fixed few
    queries.
    """
    filters = filters.cleaned()
    qs = Workload.objects.filter(is_active=True)
    if filters.cluster:
        qs = qs.filter(cluster__name=filters.cluster)
    if filters.namespace:
        qs = qs.filter(namespace=filters.namespace)
    if filters.kind:
        qs = qs.filter(kind=filters.kind)
    if filters.mode:
        qs = qs.filter(policy__mode=filters.mode)
    if filters.q:
        qs = qs.filter(name__icontains=filters.q)
    # Annotations cost a subquery per row: compute them for every row only when the
    # filter or
    # the sort needs them; the page's rows are then loaded (annotated) by id.
    if filters.status or filters.sort != "name":
        qs = annotate_workloads(qs, now=now, prices=prices)
    if filters.status:
        qs = qs.filter(status=filters.status)
    order = {
        "name": ["cluster__name", "namespace", "name", "pk"],
        "savings": ["-savings", "pk"],
        "risk": ["-risk", "-savings", "pk"],
    }[filters.sort]
    ids = qs.order_by(*order).values_list("pk", flat=True)
    paginator = Paginator(ids, max(1, min(page_size, MAX_PAGE_SIZE)))
    result = paginator.get_page(page)
    page_ids = list(result.object_list)
    rows = {
        w.pk: w
        for w in annotate_workloads(
            Workload.objects.filter(pk__in=page_ids), now=now, prices=prices
        )
        .select_related("cluster", "policy")
        .prefetch_related(
            Prefetch(
                "containers",
                queryset=recommended_containers()
                .select_related("latest_recommendation")
                .order_by("position", "name"),
            )
        )
    }
    result.object_list = [rows[pk] for pk in page_ids if pk in rows]
    return result


def filter_choices() -> dict[str, list[str]]:
    """Values for the list's filter drop-downs: clusters and namespaces that exist."""
    clusters = list(Cluster.objects.order_by("name").values_list("name", flat=True))
    namespaces = list(
        Workload.objects.filter(is_active=True)
        .order_by("namespace")
        .values_list("namespace", flat=True)
        .distinct()
    )
    return {
        "clusters": clusters,
        "namespaces": namespaces,
        "kinds": list(Workload.Kind.values),
        "modes": list(Policy.Mode.values),
    }


# --- The overview
# ---------------------------------------------------------------------------


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
    under_count: int
    under: list[Workload]
    recent_ooms: list[OomKill]
    recent_oom_count: int
    no_recommendation_count: int
    no_recommendation: list[dict[str, Any]]
    confidence: dict[str, int]
    runs: list[RefreshRun]
    is_refreshing: bool
    prices: Prices
    workload_count: int = 0


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
        recommended_containers()
        .filter(workload__is_active=True)
        .order_by()
        .values("workload__cluster__name", "workload__namespace")
        .annotate(
            containers=Count("pk"),
            covered=Count("pk", filter=~_no_data_q()),
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


def no_recommendation_reason(container: Container) -> str:
    """Why a container has no recommendation yet, in plain words."""
    rec = container.latest_recommendation
    if rec is not None:
        reason = (rec.explanation or {}).get("reason")
        if reason:
            return str(reason)
    checkpoint = getattr(container, "checkpoint", None)
    if checkpoint is None or checkpoint.sample_count == 0:
        return (
            "No usage samples yet: wait for the next refresh, or check the usage "
            "source."
        )
    return "Usage is being collected, but the history is too short to recommend yet."


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
        recommended_containers()
        .filter(workload__is_active=True, latest_recommendation__isnull=False)
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
    active = Workload.objects.filter(is_active=True)
    # Under-provisioned workloads ranked by recent OOM kills, without the costlier
    # savings
    # annotation: their ids in one query, the OOM counts of the (few) killed ones in
    # another.
    under_ids = list(
        active.filter(
            Exists(recommended_containers().filter(_under_q(), workload=OuterRef("pk")))
        )
        .order_by("namespace", "name", "pk")
        .values_list("pk", flat=True)
    )
    oom_counts = dict(
        OomKill.objects.filter(occurred_at__gte=now - RECENT_OOM_WINDOW)
        .order_by()
        .values_list("container__workload")
        .annotate(n=Count("pk"))
        .values_list("container__workload", "n")
    )
    # Stable sort: by OOM kills, then the name order of the query.
    top = sorted(under_ids, key=lambda pk: -oom_counts.get(pk, 0))[:limit]
    under = sorted(
        Workload.objects.filter(pk__in=top).select_related("cluster"),
        key=lambda w: top.index(w.pk),
    )
    for workload in under:
        workload.recent_ooms = oom_counts.get(workload.pk, 0)  # type: ignore[attr-defined]
    ooms = OomKill.objects.filter(
        occurred_at__gte=now - RECENT_OOM_WINDOW, container__workload__is_active=True
    )
    missing = (
        recommended_containers()
        .filter(workload__is_active=True)
        .filter(_no_data_q())
        .select_related("workload", "latest_recommendation", "checkpoint")
        .order_by("workload__namespace", "workload__name", "name")
    )
    runs = list(RefreshRun.objects.select_related("cluster")[:limit])
    return Overview(
        fleet=fleet,
        by_cluster=by_cluster,
        by_namespace=by_namespace,
        under_count=len(under_ids),
        under=under,
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
    )
