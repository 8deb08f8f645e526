"""Provisioning of containers: status against the recommendation's bounds, and the
monthly savings of moving to the target, per row in Python and as SQL expressions.

The definitions are in ``insights.py`` (and docs/dashboard.md); the list there, the
overview (``overview.py``) and the workload page (``workload_insight.py``) share them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from django.conf import settings
from django.db.models import (
    Case,
    Count,
    ExpressionWrapper,
    F,
    FloatField,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce

if TYPE_CHECKING:
    # Typing only (installed with django-stubs): the annotations' names on a queryset.
    from django_stubs_ext import WithAnnotations

from recommender.models import Container, OomKill, Policy, Workload

# 8760 h / 12: the month cloud price lists use.
HOURS_PER_MONTH = 730.0
GIB = 2**30
# OOM kills this recent make a workload "at risk".
RECENT_OOM_WINDOW = timedelta(days=7)


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


# --- Per-container classification (one row, in Python) --------------------------------


class ProvisionedRecommendation(Protocol):
    """What status and savings read of a recommendation: a ``Recommendation``, or a
    light row of its columns (api.workload_rows)."""

    @property
    def target_cpu_millicores(self) -> int | None: ...
    @property
    def target_memory_bytes(self) -> int | None: ...
    @property
    def lower_cpu_millicores(self) -> int | None: ...
    @property
    def lower_memory_bytes(self) -> int | None: ...
    @property
    def upper_cpu_millicores(self) -> int | None: ...
    @property
    def upper_memory_bytes(self) -> int | None: ...


class ProvisionedContainer(Protocol):
    """What status and savings read of a container: a ``Container`` (its
    latest_recommendation loaded), or a light row of its columns."""

    @property
    def request_cpu_millicores(self) -> int | None: ...
    @property
    def request_memory_bytes(self) -> int | None: ...
    @property
    def latest_recommendation(self) -> ProvisionedRecommendation | None: ...


def container_status(container: ProvisionedContainer) -> str:
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


def workload_status(container_statuses: Iterable[str]) -> str:
    """A workload's status: the worst of its containers' (under, over, no data)."""
    statuses = set(container_statuses)
    return next(
        (s for s in (Status.UNDER, Status.OVER, Status.NO_DATA) if s in statuses),
        Status.WITHIN,
    )


def container_savings(
    container: ProvisionedContainer, *, replicas: int | None, prices: Prices
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


# --- SQL expressions over containers (shared by the list and the overview) ------------


def under_q(prefix: str = "") -> Q:
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
    # Bounds without a target are no data, as container_status says (parity test).
    return q & ~no_data_q(prefix)


def over_q(prefix: str = "") -> Q:
    """Containers with a request above the upper bound."""
    q = Q()
    for req, up in (
        ("request_cpu_millicores", "latest_recommendation__upper_cpu_millicores"),
        ("request_memory_bytes", "latest_recommendation__upper_memory_bytes"),
    ):
        q |= Q(**{f"{prefix}{req}__gt": F(f"{prefix}{up}")})
    return q & ~no_data_q(prefix)


def no_data_q(prefix: str = "") -> Q:
    """Containers without a usable recommendation."""
    return Q(**{f"{prefix}latest_recommendation__isnull": True}) | Q(
        **{
            f"{prefix}latest_recommendation__target_cpu_millicores__isnull": True,
            f"{prefix}latest_recommendation__target_memory_bytes__isnull": True,
        }
    )


def shown_q(prefix: str = "") -> Q:
    """Workloads the dashboard and the API lists show: active, of an enabled cluster.

    A disabled cluster (``Cluster.is_enabled``, e.g. the simulated one once
    ``VPAWEB_SIMULATION=false``) is neither refreshed nor listed; ``prefix`` reaches the
    workload from another model ("workload__", "container__workload__").
    """
    return Q(**{f"{prefix}is_active": True, f"{prefix}cluster__is_enabled": True})


def mode_q(mode: str, prefix: str = "") -> Q:
    """Workloads in policy ``mode``; one without a policy row is Off (the default)."""
    q = Q(**{f"{prefix}policy__mode": mode})
    if mode == Policy.Mode.OFF:
        q |= Q(**{f"{prefix}policy__isnull": True})
    return q


def recommended_containers() -> QuerySet[Container]:
    """Containers vpaweb recommends for (not init containers, as upstream)."""
    return Container.objects.exclude(kind=Container.Kind.INIT)


def _diff(request: str, target: str) -> Any:
    """request - target as a float expression; 0 where the target is missing."""
    req = Coalesce(F(request), Value(0))
    return Cast(req - Coalesce(F(target), req), FloatField())


def _status_expressions() -> tuple[Count, Count, Count, Case]:
    """The SQL twin of ``container_status`` + ``workload_status``: annotate them as
    ``under_count``, ``over_count``, ``no_data_count`` and ``status`` (a parity test in
    tests/services/test_provisioning_parity.py holds the two forms together)."""
    prefix = "containers__"
    regular = ~Q(containers__kind=Container.Kind.INIT)
    return (
        Count("containers", filter=regular & under_q(prefix)),
        Count("containers", filter=regular & over_q(prefix)),
        Count("containers", filter=regular & no_data_q(prefix)),
        Case(
            When(under_count__gt=0, then=Value(Status.UNDER)),
            When(over_count__gt=0, then=Value(Status.OVER)),
            When(no_data_count__gt=0, then=Value(Status.NO_DATA)),
            default=Value(Status.WITHIN),
        ),
    )


def with_status(workloads: QuerySet[Workload], status: str) -> QuerySet[Workload]:
    """``workloads`` narrowed to one provisioning status, computed in SQL."""
    under, over, no_data, status_case = _status_expressions()
    matching = (
        Workload.objects.annotate(
            under_count=under,
            over_count=over,
            no_data_count=no_data,
            status=status_case,
        )
        .filter(status=status)
        .values("pk")
    )
    return workloads.filter(pk__in=matching)


class WorkloadAnnotations(TypedDict):
    """What ``annotate_workloads`` adds to each workload row."""

    under_count: int
    over_count: int
    no_data_count: int
    status: str
    savings: float
    recent_ooms: int
    risk: int


def annotate_workloads(
    workloads: QuerySet[Workload], *, now: datetime, prices: Prices
) -> QuerySet[WithAnnotations[Workload, WorkloadAnnotations]]:
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
    under, over, no_data, status = _status_expressions()
    return workloads.annotate(
        under_count=under,
        over_count=over,
        no_data_count=no_data,
        status=status,
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
