"""Provisioning facts of containers and workloads: risk, waste, missing requests and no
data, kept apart, with the monthly savings and a risk score. One rule, in two forms: SQL
on the ``Workload`` and ``Container`` querysets (lists, filters, sorts, overview, API)
and Python for rows already loaded (the workload page). A parity test
(tests/services/test_provisioning_parity.py) holds the two together. The lists sorted
or filtered by a fact may read the SQL form's price- and time-free parts as the refresh
stored them (``WorkloadQuerySet.with_stored_provisioning``, ``WorkloadTotals``;
tests/services/test_workload_totals.py)."""
# Definitions (also in docs/dashboard.md#statuses-risk-waste-missing-requests):
#
# - **Missing requests**: a container without a CPU or a memory request. A fact of its
#   own, never risk: nothing says the container needs more than it gets.
# - **No data**: no recommendation, or one without any target.
# - **Usage floor** of a resource: the recommendation's lower bound, or the engine's
#   lower bound *before the pod minimum* (``explanation.resources.<r>.lower_bound
#   .after_confidence``) when that is lower; kept on each recommendation as it is
#   written (``Recommendation.floor_cpu_millicores``/``floor_memory_bytes``). Upstream
#   raises every bound to the pod minimum (25m CPU, 250 MiB memory per pod) split among
#   the pod's containers, so a small sidecar gets a 125 MiB lower bound next to one
#   other container without ever having used it: that share says nothing about its need.
# - **Shortfall** of a resource with a request: ``(floor - request) / floor`` in whole
#   percent, counted when at least ``RiskRules.shortfall_percent`` (10 % by default) and
#   the container has data; a container's shortfall is the larger of CPU and memory.
# - **At risk**: recent OOM kills (since ``RiskRules.oom_since``) or a counted
#   shortfall. CPU throttling does not count: its counters are read only for profiles
#   with ``throttling_boost``, whose boost raises the CPU target (not the lower bound).
# - **Risk score** = 1000 x recent OOM kills + shortfall percent (0-100): OOM-killed
#   first (more kills first), then the largest shortfall. 0 = not at risk. A workload's
#   OOM kills are the sum over its containers, its shortfall their largest.
# - **Savings** per month = pods x sum over containers of (request - target) x price,
#   over the resources with a target (a missing request counts as 0); the request is
#   the mean the live pods carry (``billed_request``), so a pod resized in place
#   counts its own request and its change's share is realized only; pods are the
#   replicas, or for a Job or CronJob its pods' running hours per month / 730
#   (``pods_billed``). **Wasteful**: savings > 0 (a workload's total; a container's
#   own).
# - **Headline status** (one word for badges and the old ``status`` filter): ``under``
#   ("at risk") when at risk, else ``over`` ("wasteful") when wasteful, else ``missing``
#   when a request is missing, else ``no-data``, else ``within`` ("right-sized"). A
#   workload can be wasteful *and* at risk; the separate facts say so.
#
# Init containers are left out, as upstream VPA does not recommend for them. Prices and
# thresholds come in as arguments: models import no services.

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from django.db import models
from django.db.models import (
    Case,
    Count,
    ExpressionWrapper,
    F,
    FloatField,
    IntegerField,
    Max,
    OuterRef,
    Q,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce, Greatest
from django.db.models.lookups import GreaterThan, LessThan

if TYPE_CHECKING:
    from recommender.models.fleet import Container, Workload  # noqa: F401
    from recommender.models.recommendation import Recommendation

INIT_KIND = "init"  # Container.Kind.INIT (fleet.py imports this module)
# Resource -> (request field, recommendation field suffix, explanation key).
RESOURCES = (
    ("request_cpu_millicores", "cpu_millicores", "cpu"),
    ("request_memory_bytes", "memory_bytes", "memory"),
)
# The weight of one recent OOM kill in the risk score: above any shortfall (0-100).
OOM_WEIGHT = 1000
# 8760 h / 12: the month cloud price lists use.
HOURS_PER_MONTH = 730.0


class ProvisioningStatus:
    """The headline provisioning status (values used in URLs and the API, unchanged
    since v1 for ``under``, ``over``, ``within`` and ``no-data``; labels say what they
    mean now)."""

    UNDER = "under"
    OVER = "over"
    MISSING = "missing"
    NO_DATA = "no-data"
    WITHIN = "within"
    LABELS = {
        UNDER: "at risk",
        OVER: "wasteful",
        MISSING: "missing requests",
        NO_DATA: "no data",
        WITHIN: "right-sized",
    }
    CHOICES = tuple(LABELS.items())


class PriceRates(Protocol):
    """What the savings need of a price list (services' ``Prices``)."""

    @property
    def per_millicore_month(self) -> float: ...

    @property
    def per_byte_month(self) -> float: ...


@dataclass(frozen=True)
class RiskRules:
    """When a container is at risk: OOM kills since ``oom_since``, or a request below
    its usage floor by at least ``shortfall_percent``."""

    oom_since: datetime
    shortfall_percent: int = 10


# --- Python: one loaded container (latest_recommendation loaded) ----------------------


def risk_score(recent_ooms: int, shortfall_percent: int) -> int:
    """The risk score: 1000 x recent OOM kills + shortfall percent (0: not at risk)."""
    return OOM_WEIGHT * recent_ooms + shortfall_percent


@dataclass(frozen=True)
class ProvisioningFacts:
    """The facts of one container or one workload."""

    savings: float
    recent_ooms: int
    shortfall_percent: int
    missing_requests: bool
    no_data: bool

    @property
    def risk(self) -> int:
        """The risk score: 1000 x recent OOM kills + shortfall percent."""
        return risk_score(self.recent_ooms, self.shortfall_percent)

    @property
    def at_risk(self) -> bool:
        return self.risk > 0

    @property
    def wasteful(self) -> bool:
        return self.savings > 0

    @property
    def status(self) -> str:
        """The headline status (see the module's docstring)."""
        if self.at_risk:
            return ProvisioningStatus.UNDER
        if self.wasteful:
            return ProvisioningStatus.OVER
        if self.missing_requests:
            return ProvisioningStatus.MISSING
        if self.no_data:
            return ProvisioningStatus.NO_DATA
        return ProvisioningStatus.WITHIN


def _has_no_data(rec: Recommendation | None) -> bool:
    return rec is None or (
        rec.target_cpu_millicores is None and rec.target_memory_bytes is None
    )


def usage_floor(
    lower: int | None, explanation: dict[str, Any] | None, resource: str
) -> int | None:
    """The lower bound of ``resource`` ("cpu" or "memory") without the pod minimum's
    share: ``lower``, or the engine's value before the pod minimum
    (``explanation.resources.<resource>.lower_bound.after_confidence``) when lower.
    Stored on each recommendation as it is written (``Recommendation.floor_*``)."""
    if lower is None:
        return None
    before: Any = explanation if isinstance(explanation, dict) else {}
    for key in ("resources", resource, "lower_bound", "after_confidence"):
        before = before.get(key) if isinstance(before, dict) else None
    if isinstance(before, int) and not isinstance(before, bool):
        return min(lower, before)
    return lower


def _floor_of(rec: Recommendation, resource: str) -> int | None:
    field = "cpu_millicores" if resource == "cpu" else "memory_bytes"
    floor: int | None = getattr(rec, f"floor_{field}")
    return floor if floor is not None else getattr(rec, f"lower_{field}")


def billed_request(container: Container, request_field: str) -> float | None:
    """The request of ``request_field`` (``RESOURCES``' request field) one pod of
    the container counts for its savings and requested totals: the mean over the
    workload's live pods (``Container.pods_request_*``, stored by discovery), else
    the container's request."""
    mean: float | None = getattr(container, f"pods_{request_field}", None)
    if mean is not None:
        return mean
    request: int | None = getattr(container, request_field)
    return None if request is None else float(request)


def container_facts(
    container: Container,
    *,
    recent_ooms: int,
    replicas: float | None,
    prices: PriceRates,
    rules: RiskRules,
) -> ProvisioningFacts:
    """The facts of one container; ``recent_ooms`` are its OOM kills since
    ``rules.oom_since`` (the caller has them loaded)."""
    rec = container.latest_recommendation
    no_data = _has_no_data(rec)
    missing = (
        container.request_cpu_millicores is None
        or container.request_memory_bytes is None
    )
    savings = 0.0
    shortfall = 0
    if rec is not None:
        cpu = memory = 0.0
        if rec.target_cpu_millicores is not None:
            cpu = (
                billed_request(container, "request_cpu_millicores") or 0
            ) - rec.target_cpu_millicores
        if rec.target_memory_bytes is not None:
            memory = (
                billed_request(container, "request_memory_bytes") or 0
            ) - rec.target_memory_bytes
        # As Coalesce(replicas, 1) in SQL: unknown counts one pod; scaled to 0, none.
        savings = (1 if replicas is None else replicas) * (
            cpu * prices.per_millicore_month + memory * prices.per_byte_month
        )
        if not no_data:
            for request_field, _, resource in RESOURCES:
                request = getattr(container, request_field)
                floor = _floor_of(rec, resource)
                if request is None or floor is None or floor <= 0:
                    continue
                if request * 100 < floor * (100 - rules.shortfall_percent):
                    shortfall = max(shortfall, (floor - request) * 100 // floor)
    return ProvisioningFacts(
        savings=savings,
        recent_ooms=recent_ooms,
        shortfall_percent=shortfall,
        missing_requests=missing,
        no_data=no_data,
    )


def recent_oom_counts(container_ids: Iterable[int], rules: RiskRules) -> dict[int, int]:
    """OOM kills since ``rules.oom_since`` per container of ``container_ids`` (those
    without any left out): the ``recent_ooms`` of loaded rows, one query."""
    from recommender.models.recommendation import OomKill

    return dict(
        OomKill.objects.filter(
            container_id__in=list(container_ids), occurred_at__gte=rules.oom_since
        )
        .order_by()
        .values("container_id")
        .annotate(n=Count("pk"))
        .values_list("container_id", "n")
    )


def workload_facts(containers: Iterable[ProvisioningFacts]) -> ProvisioningFacts:
    """A workload's facts from its (regular and sidecar) containers' facts."""
    items = list(containers)
    return ProvisioningFacts(
        savings=sum(c.savings for c in items),
        recent_ooms=sum(c.recent_ooms for c in items),
        shortfall_percent=max((c.shortfall_percent for c in items), default=0),
        missing_requests=any(c.missing_requests for c in items),
        no_data=any(c.no_data for c in items),
    )


# --- SQL: the same rule as expressions over one container row -------------------------


def no_data_q(prefix: str = "") -> Q:
    """Containers without a usable recommendation (``prefix`` reaches the container
    from another model, e.g. "containers__")."""
    rec = f"{prefix}latest_recommendation"
    return Q(**{f"{rec}__isnull": True}) | Q(
        **{
            f"{rec}__target_cpu_millicores__isnull": True,
            f"{rec}__target_memory_bytes__isnull": True,
        }
    )


def missing_requests_q(prefix: str = "") -> Q:
    """Containers without a CPU or a memory request (``prefix`` as ``no_data_q``)."""
    return Q(**{f"{prefix}request_cpu_millicores__isnull": True}) | Q(
        **{f"{prefix}request_memory_bytes__isnull": True}
    )


def billed_request_sql(prefix: str, request_field: str) -> Any:
    """``billed_request`` over a container row (``prefix`` as ``no_data_q``), a
    float; a missing request counts as 0."""
    return Coalesce(
        F(f"{prefix}pods_{request_field}"),
        Cast(F(f"{prefix}{request_field}"), FloatField()),
        Value(0.0),
        output_field=FloatField(),
    )


def _excess(prefix: str, request_field: str, suffix: str) -> Any:
    """One pod's request - target of one resource (``RESOURCES``' request field and
    recommendation suffix), the request as the live pods carry it
    (``billed_request_sql``): 0 without a target, a missing request counting as 0."""
    request = billed_request_sql(prefix, request_field)
    target = Cast(F(f"{prefix}latest_recommendation__target_{suffix}"), FloatField())
    return ExpressionWrapper(
        request - Coalesce(target, request), output_field=FloatField()
    )


# A workload's own price per hour (``Workload.price_per_core_hour``, per GiB-hour)
# to the price of one millicore or byte for a month.
_PER_HOUR_TO_MONTH = {
    "cpu_millicores": ("price_per_core_hour", HOURS_PER_MONTH / 1000.0),
    "memory_bytes": ("price_per_gib_hour", HOURS_PER_MONTH / 2**30),
}


def _price_of(suffix: str, prices: PriceRates, workload: str) -> Any:
    """The monthly price of one unit of a resource: the workload's own (its nodes',
    ``workload`` the path to its row, "" or "workload__") or the list price."""
    field, factor = _PER_HOUR_TO_MONTH[suffix]
    default = (
        prices.per_millicore_month
        if suffix == "cpu_millicores"
        else prices.per_byte_month
    )
    return Coalesce(
        F(f"{workload}{field}") * Value(factor),
        Value(default),
        output_field=FloatField(),
    )


def pods_billed(replicas: int | None, running_hours_month: float | None) -> float:
    """The pods a workload's monthly cost counts: a Job's or CronJob's pods' running
    hours per month over the month's hours (``Workload.running_hours_month``, from
    the pods discovery saw run), else its replicas; unknown counts one pod."""
    if running_hours_month is not None:
        return running_hours_month / HOURS_PER_MONTH
    return float(1 if replicas is None else replicas)


def pods_billed_sql(prefix: str) -> Any:
    """``pods_billed`` over a workload row (``prefix``: the path to the workload,
    "" or "workload__"), as a float."""
    return Coalesce(
        F(f"{prefix}running_hours_month") / Value(HOURS_PER_MONTH),
        Cast(Coalesce(F(f"{prefix}replicas"), Value(1)), FloatField()),
        output_field=FloatField(),
    )


def _savings_per_pod(prefix: str, prices: PriceRates, workload: str) -> Any:
    """(request - target) x monthly price over the resources with a target."""
    total: Any = None
    for request_field, suffix, _ in RESOURCES:
        diff = _excess(prefix, request_field, suffix) * (
            _price_of(suffix, prices, workload)
        )
        total = diff if total is None else total + diff
    return total


def _shortfall(prefix: str, rules: RiskRules) -> Any:
    """The container's shortfall percent (0 when none is counted)."""
    rec = f"{prefix}latest_recommendation__"
    per_resource = []
    for request_field, suffix, _ in RESOURCES:
        request = F(f"{prefix}{request_field}")
        lower = F(f"{rec}lower_{suffix}")
        # The stored floor (Recommendation.floor_*), or the lower bound.
        floor = Coalesce(F(f"{rec}floor_{suffix}"), lower)
        per_resource.append(
            Case(
                When(
                    Q(
                        **{
                            f"{prefix}{request_field}__isnull": False,
                            f"{rec}lower_{suffix}__isnull": False,
                        }
                    )
                    & ~no_data_q(prefix)
                    & GreaterThan(floor, 0)
                    & LessThan(request * 100, floor * (100 - rules.shortfall_percent)),
                    then=(floor - request) * 100 / floor,
                ),
                default=Value(0),
                output_field=IntegerField(),
            )
        )
    return Greatest(*per_resource, output_field=IntegerField())


def _recent_ooms(container: str, rules: RiskRules) -> Subquery:
    """OOM kills of one container since ``rules.oom_since`` (``container`` names its
    id from the outer query: "pk", or "containers__pk" inside a workload's
    aggregate, where it is summed per joined row and never grouped by)."""
    from recommender.models.recommendation import OomKill

    return Subquery(
        OomKill.objects.filter(
            container=OuterRef(container), occurred_at__gte=rules.oom_since
        )
        .order_by()
        .values("container")
        .annotate(n=Count("pk"))
        .values("n"),
        output_field=IntegerField(),
    )


def _killed(rules: RiskRules) -> Any:
    """Ids of the containers with OOM kills since ``rules.oom_since``."""
    from recommender.models.recommendation import OomKill

    return OomKill.objects.filter(occurred_at__gte=rules.oom_since).values(
        "container_id"
    )


def _headline(
    *, risk: str, savings: str, missing: str, no_data: str, counts: bool
) -> Case:
    """The headline status from annotated facts (``counts``: missing/no_data are
    counts rather than booleans)."""
    positive = "__gt" if counts else ""
    yes: Any = 0 if counts else True
    return Case(
        When(**{f"{risk}__gt": 0}, then=Value(ProvisioningStatus.UNDER)),
        When(**{f"{savings}__gt": 0}, then=Value(ProvisioningStatus.OVER)),
        When(**{f"{missing}{positive}": yes}, then=Value(ProvisioningStatus.MISSING)),
        When(**{f"{no_data}{positive}": yes}, then=Value(ProvisioningStatus.NO_DATA)),
        default=Value(ProvisioningStatus.WITHIN),
    )


# Workload aggregates: over the workload's containers (joined) that are not init ones.
WORKLOAD_PREFIX = "containers__"
_REGULAR = ~Q(containers__kind=INIT_KIND)
# The parts of a workload's facts that depend on neither the prices nor the time (the
# OOM kills do): the columns of ``WorkloadTotals`` and ``with_stored_parts``'
# annotations. ``excess_<resource>``: per pod, the sum over containers of request -
# target (``_excess``), which the savings price.
STORED_PARTS = (
    "excess_cpu_millicores",
    "excess_memory_bytes",
    "shortfall",
    "missing_count",
    "no_data_count",
)


def _workload_parts(rules: RiskRules) -> dict[str, Any]:
    """``STORED_PARTS`` as aggregates over a workload's regular containers joined
    with their latest recommendations (a workload without any: all 0)."""
    prefix = WORKLOAD_PREFIX
    excess = {
        f"excess_{suffix}": Coalesce(
            Sum(
                _excess(prefix, request_field, suffix),
                filter=_REGULAR,
                output_field=FloatField(),
            ),
            Value(0.0),
        )
        for request_field, suffix, _ in RESOURCES
    }
    return {
        **excess,
        "shortfall": Coalesce(
            Max(_shortfall(prefix, rules), filter=_REGULAR), Value(0)
        ),
        "missing_count": Count(
            "containers", filter=_REGULAR & missing_requests_q(prefix)
        ),
        "no_data_count": Count("containers", filter=_REGULAR & no_data_q(prefix)),
    }


def _replicas() -> Any:
    """A workload's replicas as a float; unknown counts one pod (``pods_billed``)."""
    return pods_billed_sql("")


def _workload_ooms(rules: RiskRules) -> Subquery:
    """OOM kills of one workload's regular containers since ``rules.oom_since`` (the
    outer query's ``pk``)."""
    from recommender.models.recommendation import OomKill

    return Subquery(
        OomKill.objects.filter(
            container__workload=OuterRef("pk"), occurred_at__gte=rules.oom_since
        )
        .exclude(container__kind=INIT_KIND)
        .order_by()
        .values("container__workload")
        .annotate(n=Count("pk"))
        .values("n"),
        output_field=IntegerField(),
    )


def _risk_and_status() -> dict[str, Any]:
    """A workload's ``risk`` and ``status`` from its other annotated facts."""
    return {
        "risk": ExpressionWrapper(
            F("recent_ooms") * Value(OOM_WEIGHT) + F("shortfall"),
            output_field=IntegerField(),
        ),
        "status": _headline(
            risk="risk",
            savings="savings",
            missing="missing_count",
            no_data="no_data_count",
            counts=True,
        ),
    }


class ContainerQuerySet(models.QuerySet["Container"]):
    """Containers, with the provisioning facts on demand."""

    def recommended(self) -> ContainerQuerySet:
        """Containers vpaweb recommends for (not init containers, as upstream)."""
        return self.exclude(kind=INIT_KIND)

    def shown(self) -> ContainerQuerySet:
        """Containers of workloads the lists show (see ``WorkloadQuerySet.shown``)."""
        return self.filter(workload__is_active=True, workload__cluster__is_enabled=True)

    def no_data(self) -> ContainerQuerySet:
        """Containers without a usable recommendation."""
        return self.filter(no_data_q())

    def missing_requests(self) -> ContainerQuerySet:
        """Containers without a CPU or a memory request."""
        return self.filter(missing_requests_q())

    def with_provisioning(
        self, *, prices: PriceRates, rules: RiskRules
    ) -> ContainerQuerySet:
        """Annotate each container's facts: ``savings`` (all replicas),
        ``recent_ooms``, ``shortfall``, ``risk``, ``missing_requests``, ``no_data``
        and ``status``."""
        return self.annotate(
            savings=ExpressionWrapper(
                _savings_per_pod("", prices, "workload__")
                * pods_billed_sql("workload__"),
                output_field=FloatField(),
            ),
            recent_ooms=Case(
                When(kind=INIT_KIND, then=Value(0)),
                default=Coalesce(_recent_ooms("pk", rules), Value(0)),
                output_field=IntegerField(),
            ),
            shortfall=_shortfall("", rules),
            risk=ExpressionWrapper(
                F("recent_ooms") * Value(OOM_WEIGHT) + F("shortfall"),
                output_field=IntegerField(),
            ),
            missing_requests=ExpressionWrapper(
                missing_requests_q(), output_field=models.BooleanField()
            ),
            no_data=ExpressionWrapper(no_data_q(), output_field=models.BooleanField()),
            status=_headline(
                risk="risk",
                savings="savings",
                missing="missing_requests",
                no_data="no_data",
                counts=False,
            ),
        )


class WorkloadQuerySet(models.QuerySet["Workload"]):
    """Workloads, with the provisioning facts on demand."""

    def shown(self) -> WorkloadQuerySet:
        """Workloads the dashboard and the API lists show: active, of an enabled
        cluster (a disabled one, e.g. the simulated cluster once
        ``VPAWEB_SIMULATION=false``, is neither refreshed nor listed)."""
        return self.filter(is_active=True, cluster__is_enabled=True)

    def search(self, term: str) -> WorkloadQuerySet:
        """Workloads whose ``namespace/name`` (as the lists write names) contains
        ``term``, ignoring case: a term with a slash matches across it (``log/bil``
        finds ``catalog/billing``), as neither part may hold one."""
        namespace, slash, name = term.partition("/")
        if slash:
            return self.filter(namespace__iendswith=namespace, name__istartswith=name)
        return self.filter(Q(name__icontains=term) | Q(namespace__icontains=term))

    def in_mode(self, mode: str) -> WorkloadQuerySet:
        """Workloads in policy ``mode``; one without a policy row is Off (the
        default)."""
        from recommender.models.policy import Policy  # policy imports this module

        q = Q(policy__mode=mode)
        if mode == Policy.Mode.OFF:
            q |= Q(policy__isnull=True)
        return self.filter(q)

    def with_provisioning(
        self, *, prices: PriceRates, rules: RiskRules
    ) -> WorkloadQuerySet:
        """Annotate ``savings`` (monthly, all replicas), ``recent_ooms``,
        ``shortfall``, ``risk``, ``missing_count``, ``no_data_count`` and ``status``.

        Aggregates over one join (workload, containers, latest recommendation) grouped
        by workload, which both databases plan as a single hash aggregate; correlated
        subqueries per row were several times slower on PostgreSQL with 10,000 rows.
        """
        parts = _workload_parts(rules)
        return self.annotate(
            savings=ExpressionWrapper(
                Coalesce(
                    Sum(
                        _savings_per_pod(WORKLOAD_PREFIX, prices, ""),
                        filter=_REGULAR,
                        output_field=FloatField(),
                    ),
                    Value(0.0),
                )
                * _replicas(),
                output_field=FloatField(),
            ),
            # A sum over the joined containers: a per-workload subquery would be
            # grouped by and run for every joined row (10 s on PostgreSQL with 10,000
            # workloads, against 0.1 s).
            recent_ooms=Coalesce(
                Cast(
                    Sum(
                        _recent_ooms("containers__pk", rules),
                        # Only the few killed containers run the count: the ids
                        # are one hashed subquery.
                        filter=_REGULAR & Q(containers__pk__in=_killed(rules)),
                    ),
                    IntegerField(),
                ),
                Value(0),
            ),
            shortfall=parts["shortfall"],
            missing_count=parts["missing_count"],
            no_data_count=parts["no_data_count"],
            **_risk_and_status(),
        )

    def with_stored_parts(self, *, rules: RiskRules) -> WorkloadQuerySet:
        """Annotate ``STORED_PARTS``: the facts of each workload that depend on
        neither the prices nor the time, as the refresh stores them
        (``WorkloadTotals``), over ``with_provisioning``'s join and rule."""
        return self.annotate(**_workload_parts(rules))

    def with_stored_provisioning(
        self, *, prices: PriceRates, rules: RiskRules
    ) -> WorkloadQuerySet:
        """Annotate what ``with_provisioning`` does, from the stored parts
        (``WorkloadTotals``, joined; a workload without a row counts as one without
        containers) and the OOM kills since ``rules.oom_since``, counted now.

        No container is joined: the kills are counted per workload only for the
        few workloads whose stored latest kill (``WorkloadTotals.latest_oom_at``)
        is that recent."""
        # The excess columns are floats (the live pods' mean request), the rest
        # counts.
        stored = {
            name: Coalesce(
                F(f"totals__{name}"),
                Value(0.0 if name.startswith("excess_") else 0),
            )
            for name in STORED_PARTS
        }
        per_pod: Any = None
        for _, suffix, _ in RESOURCES:
            part = Cast(stored[f"excess_{suffix}"], FloatField()) * (
                _price_of(suffix, prices, "")
            )
            per_pod = part if per_pod is None else per_pod + part
        return self.annotate(
            savings=ExpressionWrapper(per_pod * _replicas(), output_field=FloatField()),
            recent_ooms=Case(
                When(
                    totals__latest_oom_at__gte=rules.oom_since,
                    then=Coalesce(_workload_ooms(rules), Value(0)),
                ),
                default=Value(0),
                output_field=IntegerField(),
            ),
            shortfall=stored["shortfall"],
            missing_count=stored["missing_count"],
            no_data_count=stored["no_data_count"],
            **_risk_and_status(),
        )

    # Filters over ``with_provisioning``'s annotations (call it first; Q objects, as
    # the type checker knows the model's fields, not the annotations).

    def with_status(self, status: str) -> WorkloadQuerySet:
        """Workloads whose headline status is ``status``."""
        return self.filter(Q(status=status))

    def at_risk(self, value: bool = True) -> WorkloadQuerySet:
        """At risk (risk score > 0), or not."""
        return self.filter(Q(risk__gt=0) if value else Q(risk=0))

    def wasteful(self, value: bool = True) -> WorkloadQuerySet:
        """Wasteful (monthly savings > 0), or not."""
        return self.filter(Q(savings__gt=0) if value else Q(savings__lte=0))

    def missing_requests(self, value: bool = True) -> WorkloadQuerySet:
        """With a container missing a request, or not."""
        return self.filter(Q(missing_count__gt=0) if value else Q(missing_count=0))
